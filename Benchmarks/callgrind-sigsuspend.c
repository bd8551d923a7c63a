/* Preloaded into the server only under valgrind by Benchmarks/callgrind-guard.
 *
 * Valgrind 3.19's wrapper of rt_sigsuspend removes its own kill signal from
 * the mask it is given by writing into the caller's memory. libdispatch's
 * dispatch_main (where Swift's async main parks the main thread on Linux)
 * passes a mask that lives in read-only memory, so valgrind itself crashes
 * with SIGSEGV. This passes a writable copy instead; the server's behaviour
 * is otherwise unchanged. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
