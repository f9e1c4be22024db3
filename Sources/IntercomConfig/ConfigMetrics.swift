/// `[metrics]`: the terminal's counters in Prometheus's text format over HTTP (docs/metrics.md).
public struct MetricsSection: Sendable, Equatable {
    /// Where to answer `GET /metrics` ("a.b.c.d:port"); "" = off.
    public var listen: String = ""
    /// A file holding the token a scraper must send (`Authorization: Bearer …`); nil = none.
    public var tokenFile: String?

    public init() {}

    /// The port the documentation and examples use.
    public static let examplePort = 9470
}

extension DaemonConfig {
    static let metricsSection = SchemaSection(name: "metrics", comment: "Metrics for a monitoring system (docs/metrics.md): Prometheus's text format over HTTP, answered by an ordinary thread.", keys: [
        .string("listen", \.metrics.listen,
                "Address and port to answer GET /metrics on, e.g. \"0.0.0.0:\(MetricsSection.examplePort)\" (the practice network) or \"127.0.0.1:\(MetricsSection.examplePort)\"; \"\" = off",
                Rule(allowed: "\"\" = off, else a.b.c.d:port") { v in v.isEmpty ? nil : endpointProblem(v) }),
        .optionalPath("token_file", \.metrics.tokenFile,
                      "File holding a token the scraper must send as `Authorization: Bearer <token>` (Prometheus: authorization.credentials_file); readable by the service alone"),
    ])
}
