import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// Who is asking: a person logged in on the page (with the session's cross-site token), or
/// practice software with an API token.
public enum Identity: Sendable, Equatable {
    case person(Account, session: String, csrf: String)
    case software(APIToken)

    /// The audit log's name for it.
    public var actor: String {
        switch self {
        case .person(let a, _, _): a.name
        case .software(let t): "token:\(t.name)"
        }
    }
}

/// A request's context: the peer's address (for the login limit) and who it is, once known.
public struct SiteContext: RequestContext, RemoteAddressRequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public var identity: Identity?
    /// Set by the event socket's route when a request upgrades (`SiteServer.socketRouter`).
    public let webSocket = WebSocketHandlerReference<SiteContext>()

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The peer's address without its port: what the login limit counts by.
    public var peer: String { remoteAddress?.ipAddress ?? "unknown" }
}
