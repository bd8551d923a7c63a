#include "CLinkedICU.h"
#include <string.h>

// Weak references: they do not make the dynamic build load ICU at start (they are
// NULL unless something else loaded it), and in the static build, where scripts/package
// links lib_FoundationICU.a and pulls these functions in with --undefined, they are
// its hidden definitions, which dlsym could not find. The signatures do not matter:
// only the addresses are taken. The list is ICU.symbols (a test holds them equal).
#define AGENTRPC_ICU_FUNCTIONS(X) \
    X(swift_uregex_open) X(swift_uregex_clone) X(swift_uregex_close) X(swift_uregex_setText) \
    X(swift_uregex_findNext) X(swift_uregex_start) X(swift_uregex_end) X(swift_uregex_setMatchCallback) \
    X(swift_uregex_setFindProgressCallback) X(swift_u_errorName) X(swift_unorm2_getNFDInstance) \
    X(swift_unorm2_normalize) X(swift_u_strFoldCase)

#define AGENTRPC_DECLARE(name) extern void name(void) __attribute__((weak));
AGENTRPC_ICU_FUNCTIONS(AGENTRPC_DECLARE)

const void *agentrpc_linked_icu_function(const char *name) {
#define AGENTRPC_FIND(function) if (strcmp(name, #function) == 0) return (const void *)&function;
    AGENTRPC_ICU_FUNCTIONS(AGENTRPC_FIND)
    return 0;
}
