import Control
import Prometheus

/// A terminal's statistics in Prometheus's text format (docs/metrics.md): each scrape reads one
/// `DaemonStatistics` snapshot, the same one `intercomctl stats` shows, and writes it through a
/// fresh swift-prometheus registry. Fresh, because the values are the snapshot's own (a counter
/// is set to the daemon's count, not counted here), and a stream that ended leaves no series.
/// Names follow Prometheus's conventions: `intercom_` prefix, base units, `_total` on counters.
public enum TerminalMetrics {
    /// What the terminal is (labels of `intercom_terminal_info`), and its frame length (for
    /// the delay the quality estimate takes).
    public struct Identity: Sendable, Equatable {
        public var room: String
        public var software: String
        public var frameMs: Double
        public init(room: String, software: String, frameMs: Double) {
            self.room = room
            self.software = software
            self.frameMs = frameMs
        }
    }

    /// - Parameter requests: the metrics endpoint's own requests so far, by outcome.
    public static func exposition(_ s: DaemonStatistics, identity: Identity, requests: [(outcome: String, count: Int)] = []) -> [UInt8] {
        let r = PrometheusCollectorRegistry()
        // The unit is part of each name here ("_total", "_seconds"): an empty unit adds nothing.
        func named(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "intercom", metricName: name, unitName: "", helpText: help)
        }
        func counter(_ name: String, _ help: String, _ value: Int, _ labels: [(String, String)] = []) {
            r.makeCounter(descriptor: named(name, help), labels: labels).increment(by: Int64(max(0, value)))
        }
        func gauge(_ name: String, _ help: String, _ value: Double, _ labels: [(String, String)] = []) {
            r.makeGauge(descriptor: named(name, help), labels: labels).set(value)
        }

        gauge("terminal_info", "The terminal: its room and software (always 1).", 1,
              [("room", identity.room), ("software", identity.software)])

        let a = s.audio
        gauge("audio_running", "1 while the audio thread runs a device session.", a.running ? 1 : 0)
        counter("audio_frames_total", "Audio frames processed.", a.frames)
        counter("audio_xruns_total", "Device overruns and underruns, by direction.", a.captureXruns, [("direction", "capture")])
        counter("audio_xruns_total", "Device overruns and underruns, by direction.", a.playbackXruns, [("direction", "playback")])
        counter("audio_sessions_total", "Device sessions started (1 + restarts).", a.sessions)
        counter("audio_capture_gap_frames_total", "Captured time that never reached the network, frames.", a.captureGapFrames)
        counter("audio_microphone_drops_total", "Microphone frames dropped.", a.micDrops)
        counter("audio_clipped_samples_total", "Samples clipped, by where.", a.microphoneClippedSamples, [("where", "microphone")])
        counter("audio_clipped_samples_total", "Samples clipped, by where.", a.speakerClippedSamples, [("where", "speaker")])
        gauge("audio_frame_processing_max_seconds", "The longest a frame took to process since the start.", a.processMaxMs / 1000)
        gauge("audio_device_delay_seconds", "What the devices hold now, by direction.", a.captureDelayMs / 1000, [("direction", "capture")])
        gauge("audio_device_delay_seconds", "What the devices hold now, by direction.", a.playbackDelayMs / 1000, [("direction", "playback")])
        gauge("echo_return_loss_enhancement_db", "How much of the speaker's echo the canceller removes now, dB.", a.echoReturnLossEnhancementDB)
        if let delay = a.echoDelayMs { gauge("echo_delay_seconds", "The measured echo delay, speaker to microphone.", delay / 1000) }
        counter("echo_gated_frames_total", "Captured frames the residual echo gate attenuated.", a.echoGatedFrames)
        counter("echo_canceller_resets_total", "Times the echo canceller started over.", a.echoCancellerResets)
        if let howls = a.howls { counter("howls_total", "Feedback loops the howl guard broke.", howls) }

        if let n = s.network {
            counter("network_packets_sent_total", "RTP packets sent.", n.sent)
            counter("network_send_errors_total", "RTP packets that could not be sent.", n.sendErrors)
            counter("network_datagrams_received_total", "Media datagrams received, by verdict.", n.accepted, [("verdict", "accepted")])
            counter("network_datagrams_received_total", "Media datagrams received, by verdict.", n.malformed, [("verdict", "malformed")])
            counter("network_datagrams_received_total", "Media datagrams received, by verdict.", n.notRouted, [("verdict", "not_routed")])
            counter("network_datagrams_received_total", "Media datagrams received, by verdict.", n.srtp.unauthenticated, [("verdict", "unauthenticated")])
            counter("network_datagrams_received_total", "Media datagrams received, by verdict.", n.srtp.replayed, [("verdict", "replayed")])
            for st in n.streams {
                let l = [("source", st.source), ("ssrc", String(st.ssrc))]
                counter("stream_packets_received_total", "Packets received of a remote stream.", st.received, l)
                counter("stream_frames_played_total", "Frames of a remote stream played.", st.played, l)
                counter("stream_frames_concealed_total", "Frames lost and concealed by the decoder.", st.concealed, l)
                counter("stream_frames_fec_recovered_total", "Lost frames recovered from the next packet's FEC.", st.fecRecovered, l)
                counter("stream_packets_late_total", "Packets that came after their time and were discarded.", st.late, l)
                counter("stream_underruns_total", "Times the buffer ran dry.", st.underruns, l)
                gauge("stream_buffer_delay_seconds", "What the jitter buffer holds now.", st.delayMs / 1000, l)
                gauge("stream_buffer_target_seconds", "What the jitter buffer aims to hold.", st.targetMs / 1000, l)
                gauge("stream_drift_ppm", "The remote clock's rate against ours, parts per million.", st.driftPPM, l)
                // Mouth to ear, estimated: the sender's capture and encoder taken as ours, a frame,
                // the receive side (jitter buffer and drift corrector), our playback; a LAN's transit ~0.
                let delay = a.captureDelayMs + identity.frameMs + (n.opus?.lookaheadMs ?? 0) + st.playoutDelayMs + a.playbackDelayMs
                let loss = st.played + st.concealed > 0 ? Double(st.concealed) / Double(st.played) : 0
                gauge("stream_loss_ratio", "Frames lost and not recovered, of those played, since the stream began.", min(1, loss), l)
                gauge("stream_mos_estimate", "An estimated MOS (ITU-T G.107's E-model, narrowband scale) from the stream's delay and loss; an estimate, not a measurement.",
                      CallQualityEstimate(delayMs: delay, lossRatio: loss).mos, l)
            }
        }

        if let c = s.calls {
            counter("signalling_datagrams_total", "Signalling datagrams, by direction.", c.datagramsSent, [("direction", "sent")])
            counter("signalling_datagrams_total", "Signalling datagrams, by direction.", c.datagramsReceived, [("direction", "received")])
            counter("signalling_retransmissions_total", "Signalling messages sent again for want of an acknowledgement.", c.retransmissions)
            counter("signalling_unreachable_total", "Signalling messages given up on.", c.unreachable)
            counter("signalling_session_renewals_total", "Session keys renewed (under terminal keys, hourly).", c.sessionRenewals)
            for (reason, count) in c.refused.byReason {
                counter("signalling_refused_total", "Signalling refused, by reason.", count, [("reason", reason)])
            }
            gauge("call_active", "1 while this terminal's voice goes to a call.", c.mediaTo.isEmpty ? 0 : 1)
            for to in c.mediaTo { gauge("call_media_to", "Where this terminal's voice goes now (1 each; a multicast group in a group call).", 1, [("to", to)]) }
            for e in c.ended {
                counter("calls_ended_total", "Calls that ended, by direction (outgoing: placed here) and outcome (finished: answered).", e.count,
                        [("direction", e.direction.rawValue), ("outcome", e.outcome.rawValue)])
            }
            gauge("missed_calls_waiting", "Missed calls not acknowledged yet.", Double(c.missedWaiting))
            counter("missed_call_reminders_total", "Reminder tones sounded for missed calls not acknowledged.", c.missedReminders)
            counter("notifications_sent_total", "Notifications sent from here.", c.notifications.sent)
            counter("notifications_received_total", "Notifications received (each once).", c.notifications.received)
            counter("notifications_acknowledged_total", "Notifications acknowledged here.", c.notifications.acknowledged)
            gauge("notifications_pending", "Notifications received and not acknowledged yet.", Double(c.notifications.pending))
            counter("notification_reminders_total", "Reminders sounded for notifications not acknowledged (each repeats every one waiting).", c.notifications.reminders)
            for (room, online) in c.online.sorted(by: { $0.key < $1.key }) {
                gauge("room_online", "1 while a room's terminal is heard (this one always).", online ? 1 : 0, [("room", room)])
            }
            for (room, address) in c.moved.sorted(by: { $0.key < $1.key }) {
                gauge("room_moved", "1 while a room is heard at another address than its directory entry's (followed there).", 1,
                      [("room", room), ("address", address)])
            }
            counter("notifications_spoken_total", "Notifications read aloud.", c.speech.spoken)
            counter("speech_failures_total", "Texts that could not be spoken.", c.speech.failures)
            counter("store_write_failures_total", "History and state writes that failed.", c.storeFailures)
            counter("acks_dropped_total", "Acknowledgements dropped while more than \(DaemonStatistics.Calls.heldAcksLimit) waited for a slow disk (their senders try again).", c.acksDropped)
        }

        if let site = s.site {
            gauge("site_version", "The site document version held.", Double(site.version))
            gauge("site_applied", "1 when the version held is applied.", site.appliedAt == nil ? 0 : 1)
            for (reason, count) in site.refused.sorted(by: { $0.key < $1.key }) {
                counter("site_documents_refused_total", "Site documents refused, by reason.", count, [("reason", reason)])
            }
        }
        if let t = s.selfTest {
            counter("selftest_runs_total", "Self-tests that gave a result, by outcome.", t.runs - t.failures, [("outcome", "passed")])
            counter("selftest_runs_total", "Self-tests that gave a result, by outcome.", t.failures, [("outcome", "failed")])
            counter("selftest_postponed_total", "Due self-tests that waited for quiet.", t.postponed)
            counter("selftest_aborted_total", "Self-tests cut short by an audio restart.", t.aborted)
            if let last = t.last {
                gauge("selftest_passed", "1 when the last self-test passed, 0 when it failed.", last.passed ? 1 : 0)
                gauge("selftest_last_run_timestamp_seconds", "When the last self-test ran, Unix time.", last.at)
                if let ms = last.roundTripMs {
                    gauge("selftest_round_trip_seconds", "The device round trip the last self-test measured.", ms / 1000)
                }
            }
        }
        counter("reloads_total", "Configuration reloads, by outcome.", s.reload.count - s.reload.failed, [("outcome", "applied")])
        counter("reloads_total", "Configuration reloads, by outcome.", s.reload.failed, [("outcome", "failed")])
        for (outcome, count) in requests {
            counter("metrics_requests_total", "Requests to this endpoint, by outcome.", count, [("outcome", outcome)])
        }
        return r.emitToBuffer()
    }
}
