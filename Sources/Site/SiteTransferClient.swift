import Posix

extension SiteTransfer {
    /// One transfer as the asking side: connects to `endpoint`, sends `request`, reads the whole
    /// reply; all of it by `timeout` seconds from now, or until `cancel` (a descriptor) is
    /// readable. A terminal's fetches and the administrator's tool both go through here.
    public static func exchange(_ request: Request, with endpoint: IPv4Endpoint, timeout: Double,
                                cancel: Int32? = nil) -> Result<Reply, SiteTransferError> {
        let deadline = MonotonicClock.seconds() + timeout
        do throws(SystemError) {
            let socket = try TCPSocket.connect(to: endpoint, deadline: deadline, cancel: cancel)
            try socket.sendAll(request.encoded(), deadline: deadline, cancel: cancel)
            socket.shutdownWrite()
            let bytes = try socket.receiveAll(limit: maximumBytes, deadline: deadline, cancel: cancel)
            guard bytes.count <= maximumBytes else { return .failure(SiteTransferError("the reply from \(endpoint) is larger than \(maximumBytes) bytes")) }
            return Reply.decode(bytes).mapError { SiteTransferError("\(endpoint): \($0)") }
        } catch {
            return .failure(SiteTransferError("\(error)"))
        }
    }
}
