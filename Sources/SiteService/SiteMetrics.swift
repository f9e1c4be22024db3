import Calls
import Control
import Prometheus

/// The whole site as the service sees it, in Prometheus's text format (docs/metrics.md): one
/// scrape target that says which terminal is online, answers, is approved and holds which
/// document, for a service company watching fifty terminals without reaching each one. Built
/// from the same `SiteEditor.Terminal` rows `GET /terminals` returns, through a fresh
/// swift-prometheus registry per scrape (the values are the rows', not counted here).
enum SiteMetrics {
    static func exposition(site: String, version: UInt64, terminals: [SiteEditor.Terminal], memberConnected: Bool) -> [UInt8] {
        let r = PrometheusCollectorRegistry()
        func gauge(_ name: String, _ help: String, _ value: Double, _ labels: [(String, String)] = []) {
            r.makeGauge(descriptor: MetricNameDescriptor(namespace: "intercom_site", metricName: name, unitName: "", helpText: help),
                        labels: labels).set(value)
        }
        gauge("info", "The site service: its site and software (always 1).", 1, [("site", site), ("software", Software.version)])
        gauge("document_version", "The site document the service holds (signed last).", Double(version))
        gauge("member_connected", "1 while the service hears the site through its member terminal.", memberConnected ? 1 : 0)
        for t in terminals {
            let room = [("room", t.room)]
            gauge("terminal_reached", "1 if the room's terminal answered the service's question at this scrape.", t.reached ? 1 : 0, room)
            if let standing = t.standing {
                gauge("terminal_info", "The room's terminal as it answered: software and standing (always 1).", 1,
                      room + [("software", t.software ?? ""), ("standing", standing.rawValue)])
            }
            if let online = t.online { gauge("terminal_online", "1 if the service's member hears the room's terminal now.", online ? 1 : 0, room) }
            if let held = t.siteVersion { gauge("terminal_document_version", "The site document the room's terminal holds.", Double(held), room) }
            if let behind = t.behind { gauge("terminal_behind", "1 if the room's terminal holds an older document than the newest held.", behind ? 1 : 0, room) }
            if let seen = t.lastSeen { gauge("terminal_last_seen_timestamp_seconds", "When the room's terminal was last seen online, Unix time.", seen, room) }
            if let h = t.health {
                gauge("terminal_fault", "1 if the room's terminal says its sound devices do not work or its last self-test failed.",
                      h.isFaulty ? 1 : 0, room)
                gauge("terminal_audio_info", "The room's terminal's sound devices as it says: off, running or unavailable (always 1).", 1,
                      room + [("audio", h.audio.rawValue), ("self_test", h.selfTest.rawValue)])
                gauge("terminal_xruns", "Dropouts of the room's terminal's sound devices since its daemon started, as it says.", Double(h.xruns), room)
                gauge("terminal_uptime_seconds", "Seconds since the room's terminal's daemon started, as it says.", Double(h.uptimeSeconds), room)
            }
        }
        return r.emitToBuffer()
    }
}
