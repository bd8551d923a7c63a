#ifndef AGENTRPC_CDISPATCHSIGNAL_H
#define AGENTRPC_CDISPATCHSIGNAL_H

/// libdispatch's `DISPATCH_SOURCE_TYPE_SIGNAL`: the address of its exported constant,
/// which Swift cannot import (the constant's struct is opaque) and which dlsym cannot
/// find in the static build (libdispatch linked in, its symbols not exported).
/// Sources/AgentRPC/Portability/Dispatching.swift.
const void *_Nonnull agentrpc_dispatch_source_type_signal(void);

#endif
