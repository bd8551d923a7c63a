// swift-tools-version: 6.2
import PackageDescription

/// Every target is built in Swift 6 language mode with warnings treated as errors,
/// so concurrency diagnostics can never slip in as "just warnings".
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
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
        .target(name: "AgentRPC", dependencies: ["AgentRPCProtocol", "CLinkedICU"], path: "Sources/AgentRPC", swiftSettings: strict),
        // The tools around the engine: the terminal chat, and recording and replaying
        // client/server conversations. Not part of the library an embedder links.
        .target(name: "AgentTools", dependencies: ["AgentRPC", "AgentRPCProtocol"], path: "Sources/AgentTools", swiftSettings: strict),
        // `agentrpc acp`: the Agent Client Protocol front end, which talks to the
        // engine only through the library's embedding API (docs/acp.md).
        .target(name: "AgentRPCACP", dependencies: ["AgentRPC", "AgentRPCProtocol", "AgentTools"], path: "Sources/ACP", swiftSettings: strict),
        .executableTarget(name: "agentrpc", dependencies: ["AgentRPC", "AgentRPCACP", "AgentTools"], path: "Sources/agentrpc", swiftSettings: strict),
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
