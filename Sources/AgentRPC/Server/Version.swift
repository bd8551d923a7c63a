extension Server {
    /// This release's version: `agentrpc --version`, `serverInfo.version`.
    /// Copied from the repository's `VERSION` file by `scripts/version`, like
    /// the clients' versions; `VersionTests` fails when the copies disagree.
    public static let version = "0.1.0"
}
