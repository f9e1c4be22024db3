import HummingbirdCore
import Logging
import NIOCore

/// Closes a connection whose first request head has not arrived within `seconds` of connecting,
/// the TLS handshake included: a silent or trickling client does not keep a connection for ever.
/// Needed because Hummingbird's idle timeout starts only once a first request head was read
/// (with the WebSocket upgrade in the pipeline). Sits right behind TLS and looks for the blank
/// line that ends the head; after that it only passes bytes on.
final class FirstRequestDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let seconds: Int64
    private var timer: Scheduled<Void>?
    /// Bytes of "\r\n\r\n" seen in a row; 4: the head is complete.
    private var matched = 0

    init(seconds: Int64) { self.seconds = seconds }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if matched < 4 {
            for byte in unwrapInboundIn(data).readableBytesView {
                if byte == (matched % 2 == 0 ? 13 : 10) { matched += 1 } else { matched = byte == 13 ? 1 : 0 }
                if matched == 4 {
                    timer?.cancel()
                    timer = nil
                    break
                }
            }
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    private func start(_ context: ChannelHandlerContext) {
        guard timer == nil, matched < 4 else { return }
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: .seconds(seconds)) { channel.close(promise: nil) }
    }
}

/// `base` with `FirstRequestDeadline` in front (behind TLS when wrapped `withTLS`).
struct WithFirstRequestDeadline<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let seconds: Int64

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let seconds = seconds
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(FirstRequestDeadline(seconds: seconds))
        }.flatMap { base.setup(channel: channel, logger: logger) }
    }

    func handle(value: Value, logger: Logger) async { await base.handle(value: value, logger: logger) }
}
