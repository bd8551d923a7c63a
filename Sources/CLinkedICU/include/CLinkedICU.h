#ifndef AGENTRPC_CLINKEDICU_H
#define AGENTRPC_CLINKEDICU_H

/// The address of an ICU function (by its `swift_`-prefixed name) when ICU is linked
/// into the binary (the static package build), else NULL: the dynamic build opens
/// lib_FoundationICU.so at the first pattern instead (Sources/AgentRPC/Portability/ICU.swift).
const void *agentrpc_linked_icu_function(const char *name);

#endif
