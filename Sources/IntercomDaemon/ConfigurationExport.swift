// The configuration types are part of the daemon's interface: importing IntercomDaemon brings them.
@_exported import IntercomConfig
