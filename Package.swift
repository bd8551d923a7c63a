// swift-tools-version: 6.2
import PackageDescription

/// Every target is built in Swift 6 language mode with warnings treated as errors,
/// so concurrency diagnostics can never slip in as "just warnings"; and, in Linux
/// release builds, with the code generation the start-up layout needs (below).
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
    // Linux release builds: each function in a section of its own, so that the linker
    // can lay out the server's functions in the order `startupLayout` gives; and a
    // concrete generic type's metadata made by calling its accessor with the witness
    // tables the compiler knows, instead of from its mangled name, which makes the
    // runtime look each conformance up by scanning every loaded image the first time
    // (a fifth of a cold start's instructions; Benchmarks/README.md, "Session 12").
    .unsafeFlags(
        ["-Xfrontend", "-function-sections", "-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"],
        .when(platforms: [.linux], configuration: .release)
    ),
]

/// The functions a start and the first turns run, placed side by side at the end of
/// the server's code (Linux release builds; gold, the toolchain's linker there). A
/// page of code becomes resident the first time anything on it runs, and the kernel
/// maps the pages around it too: scattered over the 5 MB of code, the ~700 functions
/// a start runs made 2.8-3.6 MB of it resident; side by side, 0.5 MB
/// (Benchmarks/README.md, "Session 12: the code a start runs, side by side").
/// `Benchmarks/callgrind-guard --write-function-order` writes the list from the
/// functions its scenarios run; a function missing from it only lands elsewhere.
let functionOrder = "Sources/agentrpc/function-order.txt"
let startupLayout: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "--section-ordering-file=\(Context.packageDirectory)/\(functionOrder)"],
                 .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "agentrpc",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "agentrpc", targets: ["agentrpc"]),
        .library(name: "AgentRPC", targets: ["AgentRPC"]),
        .library(name: "AgentRPCProtocol", targets: ["AgentRPCProtocol"]),
    ],
    targets: [
        .target(
            name: "AgentRPCProtocol", path: "Sources/Protocol", swiftSettings: strict,
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]
        ),
        // The address of ICU's functions when the static package build links ICU in
        // (Sources/AgentRPC/Portability/ICU.swift; weak references, NULL otherwise).
        .target(name: "CLinkedICU", path: "Sources/CLinkedICU"),
        // libdispatch's signal source type, for the signal sources the package makes
        // through libdispatch's C interface (Sources/AgentRPC/Portability/Dispatching.swift).
        .target(name: "CDispatchSignal", path: "Sources/CDispatchSignal"),
        .target(name: "AgentRPC", dependencies: ["AgentRPCProtocol", "CLinkedICU", "CDispatchSignal"], path: "Sources/AgentRPC", swiftSettings: strict),
        // The tools around the engine: the terminal chat, and recording and replaying
        // client/server conversations. Not part of the library an embedder links.
        .target(name: "AgentTools", dependencies: ["AgentRPC", "AgentRPCProtocol"], path: "Sources/AgentTools", swiftSettings: strict),
        // `agentrpc acp`: the Agent Client Protocol front end, which talks to the
        // engine only through the library's embedding API (docs/acp.md).
        .target(name: "AgentRPCACP", dependencies: ["AgentRPC", "AgentRPCProtocol", "AgentTools"], path: "Sources/ACP", swiftSettings: strict),
        .executableTarget(
            name: "agentrpc", dependencies: ["AgentRPC", "AgentRPCACP", "AgentTools"], path: "Sources/agentrpc",
            exclude: ["function-order.txt"], swiftSettings: strict, linkerSettings: startupLayout
        ),
        .executableTarget(name: "agentrpc-bench", dependencies: ["AgentRPC", "AgentRPCProtocol"], path: "Benchmarks/agentrpc-bench", swiftSettings: strict),
        .testTarget(name: "ProtocolTests", dependencies: ["AgentRPCProtocol"], path: "Tests/ProtocolTests", swiftSettings: strict),
        .testTarget(
            name: "AgentRPCTests",
            dependencies: ["AgentRPC", "AgentRPCProtocol", "AgentTools", "agentrpc"],
            path: "Tests/AgentRPCTests",
            resources: [],
            swiftSettings: strict
        ),
    ]
)
