#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The C library's function `name`, called through a pointer of type `F` (a
/// `@convention(c)` function type spelling its C signature), or nil where the
/// library lacks it. For what the Glibc module does not declare: functions that
/// need `_GNU_SOURCE` (`pipe2`, `pwritev2`), newer ones
/// (`posix_spawn_file_actions_addclosefrom_np`), and the fixed-argument forms
/// of variadic ones Swift cannot call (`prctl`, `syscall`). Look each up once.
func cLibraryFunction<F>(_ name: String, as type: F.Type) -> F? {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), name) else { return nil }
    return unsafeBitCast(symbol, to: type)
}
