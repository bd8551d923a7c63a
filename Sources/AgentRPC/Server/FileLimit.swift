#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's descriptor limit. Systems start programs with a soft limit
/// (1024 on most Linux machines, 256 on macOS) far below the hard one; sessions,
/// model connections and tool servers all draw on it.
enum FileLimit {
    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (on macOS also to
    /// `OPEN_MAX`, which `setrlimit` will not exceed there). Returns (before, after).
    @discardableResult
    static func raiseSoftLimit(logger: Logger) -> (before: UInt64, after: UInt64)? {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else {
            logger.debug("file limit: getrlimit failed (errno \(errno))")
            return nil
        }
        let before = UInt64(limit.rlim_cur)
        var target = limit.rlim_max
        #if canImport(Darwin)
        target = min(target, rlim_t(OPEN_MAX))
        #endif
        guard target > limit.rlim_cur else {
            logger.debug("file limit: soft limit \(before) is already the hard limit")
            return (before, before)
        }
        limit.rlim_cur = target
        guard setrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else {
            logger.debug("file limit: cannot raise the soft limit \(before) to \(target) (errno \(errno))")
            return (before, before)
        }
        logger.debug("file limit: soft limit raised from \(before) to \(UInt64(target))")
        return (before, UInt64(target))
    }
}

#if canImport(Glibc)
// Glibc imports RLIMIT_NOFILE as an enum case of `__rlimit_resource`.
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
#endif
