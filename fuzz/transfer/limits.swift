// What SiteTransfer reads from SiteSecurity (not built here): the gate's largest document. The
// framing's checks depend on it only as a bound.
enum SignedSiteDocument {
    static let maximumBytes = 512 * 1024
}
