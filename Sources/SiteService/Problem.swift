import Calls
import Control
import Foundation
import Hummingbird

/// A problem document (RFC 9457), as the API answers every refusal: the HTTP status, a title for
/// people and, for bad input, the member of the request it is about.
public struct ProblemDocument: Codable, Sendable, Equatable {
    public var type: String
    public var title: String
    public var status: Int
    public var detail: String
    public var field: String?
    /// For a document with problems: each, with the key it is about.
    public var errors: [ProblemItem]?
}

/// One problem of a document sent (a site document's key and what is wrong with it).
public struct ProblemItem: Codable, Sendable, Equatable {
    public var key: String
    public var problem: String
    public var line: Int?
}

/// A refusal of the service: thrown by a handler, answered as `application/problem+json`.
public struct Problem: Error, HTTPResponseError, Sendable, Equatable {
    public let status: HTTPResponse.Status
    public let document: ProblemDocument

    public init(_ status: HTTPResponse.Status, _ slug: String, _ title: String, detail: String, field: String? = nil,
                errors: [ProblemItem]? = nil) {
        self.status = status
        document = ProblemDocument(type: "https://intercom.invalid/problems/\(slug)", title: title, status: status.code,
                                   detail: detail, field: field, errors: errors)
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/problem+json"
        if status == .tooManyRequests { headers[.retryAfter] = String(Int(LoginLimiter.standard.window)) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: .init(bytes: (try? Wire.encode(document)) ?? [])))
    }

    public static func badInput(_ field: String?, _ detail: String) -> Problem {
        Problem(.badRequest, "bad-input", "The request is not valid", detail: detail, field: field)
    }
    public static let unauthenticated = Problem(.unauthorized, "unauthenticated", "Log in first",
                                                detail: "no valid session cookie or bearer token")
    public static func forbidden(_ detail: String) -> Problem { Problem(.forbidden, "forbidden", "Not allowed", detail: detail) }
    public static func notFound(_ detail: String) -> Problem { Problem(.notFound, "not-found", "Not found", detail: detail) }
    public static let tooManyLogins = Problem(.tooManyRequests, "too-many-logins", "Too many failed logins",
                                              detail: "wait \(Int(LoginLimiter.standard.window)) s before the next attempt")

    /// The problem for a `SiteServiceError`.
    public init(_ error: SiteServiceError) {
        switch error {
        case .invalid(let field, let what): self = .badInput(field, "\"\(field)\" must be \(what)")
        case .conflict(let field, let what): self = Problem(.conflict, "conflict", "Already there", detail: what, field: field)
        case .storage(let what): self = Problem(.internalServerError, "storage", "The database failed", detail: what)
        }
    }
}

extension Problem {
    /// The problem for the member terminal's refusal of a command; `field` is the request's
    /// member the command was made from.
    public init(_ refusal: ControlFailure, field: String? = nil) {
        let status: HTTPResponse.Status = switch refusal.code {
        case .invalidArgument, .unknownCommand: .unprocessableContent
        case .notPermitted: .forbidden
        // The terminal answered but its state does not allow it (in a call already, nothing to
        // acknowledge, no audio): 409. 503 stays for a terminal that does not answer.
        case .busy, .notInCall, .unavailable: .conflict
        case .parseError, .internal: .badGateway
        }
        self.init(status, "terminal-\(refusal.code.rawValue.replacingOccurrences(of: "_", with: "-"))", "The terminal refused",
                  detail: refusal.message, field: status == .unprocessableContent ? field : nil)
    }
}
