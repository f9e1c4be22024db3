import Crypto
import Foundation
import NIOSSL
import Posix
import SwiftASN1
import X509

/// The site's own certificate authority and the service's certificate, made on first start in
/// `<dir>/tls` (keys mode 0600). A browser trusts the page once `ca.pem` is imported as an
/// authority (docs/site-service.md); nothing is fetched from the internet, which the practice
/// LAN does not have.
public struct SiteCertificate: Sendable {
    public let caPath: String
    public let certificatePath: String
    public let keyPath: String

    /// Loads the files in `directory`, or makes them: an authority valid 20 years, and a
    /// certificate for `names` (host names and IPv4 addresses) valid 825 days, the longest
    /// browsers take. A certificate for other names is made again from the same authority.
    public static func prepare(directory: String, siteID: String, names: [String], now: Date = Date()) throws -> SiteCertificate {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let ca = directory + "/ca.pem", caKey = directory + "/ca.key"
        let cert = directory + "/server.pem", key = directory + "/server.key", namesFile = directory + "/server.names"
        let files = SiteCertificate(caPath: ca, certificatePath: cert, keyPath: key)
        let fm = FileManager.default
        let authorityKey: P256.Signing.PrivateKey
        let authorityName = try DistinguishedName {
            OrganizationName("intercom site \(siteID)")
            CommonName("intercom site \(siteID) authority")
        }
        if fm.fileExists(atPath: ca), fm.fileExists(atPath: caKey) {
            authorityKey = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: caKey, encoding: .utf8))
        } else {
            authorityKey = P256.Signing.PrivateKey()
            let authority = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(authorityKey.publicKey),
                notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(20 * 365 * 86400),
                issuer: authorityName, subject: authorityName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                },
                issuerPrivateKey: .init(authorityKey))
            try write(authorityKey.pemRepresentation, to: caKey, mode: 0o600)
            try write(try authority.serializeAsPEM().pemString, to: ca, mode: 0o644)
        }
        let wanted = names.joined(separator: "\n")
        if fm.fileExists(atPath: cert), fm.fileExists(atPath: key), (try? String(contentsOfFile: namesFile, encoding: .utf8)) == wanted {
            return files
        }
        let serverKey = P256.Signing.PrivateKey()
        let alternatives: [GeneralName] = names.map { name in
            if let bytes = IPv4Bytes(name) { return .ipAddress(ASN1OctetString(contentBytes: ArraySlice(bytes))) }
            return .dnsName(name)
        }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(825 * 86400),
            issuer: authorityName, subject: try DistinguishedName { CommonName(names.first ?? "intercom-site") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(alternatives)
            },
            issuerPrivateKey: .init(authorityKey))
        try write(serverKey.pemRepresentation, to: key, mode: 0o600)
        try write(try server.serializeAsPEM().pemString, to: cert, mode: 0o644)
        try write(wanted, to: namesFile, mode: 0o644)
        return files
    }

    /// TLS 1.2 or newer only, with the service's certificate.
    public func serverConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
        tls.minimumTLSVersion = .tlsv12
        // A connection closed by the service (stopping, or an event stream ended) waits this long
        // for the client's close_notify, not NIOSSL's 5 s: a stop must not wait for clients.
        tls.shutdownTimeout = .milliseconds(500)
        return tls
    }

    /// Whole or not at all, and a key file never readable by others, not even for a moment.
    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        do {
            try WholeFile.replace(path, mode: mode, syncDirectory: true) { fd in
                try Array(text.utf8).withUnsafeBytes { try WholeFile.write(fd, $0) }
            }
        } catch let error as SystemError {
            throw SiteServiceError.storage("\(path): \(error.cannotText)")
        }
    }

    private static func IPv4Bytes(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let bytes = parts.compactMap { UInt8($0) }
        return bytes.count == 4 ? bytes : nil
    }
}
