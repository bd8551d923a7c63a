#include "CDispatchSignal.h"

// Declared here rather than through <dispatch/dispatch.h>, which needs blocks: only
// the address is taken, and the linker resolves it in the dynamic and static builds.
struct dispatch_source_type_s;
extern const struct dispatch_source_type_s _dispatch_source_type_signal;

const void *_Nonnull agentrpc_dispatch_source_type_signal(void) {
    return &_dispatch_source_type_signal;
}
