//! `POST /v1/countersign`: mint a countersignature for one approved call, after writing
//! its audit record; `GET /.well-known/jwks.json`: the public key that checks them.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use countersign::{
    audit::AuditEvent, audit::Decider, outcome::Stage, ticket::GrantId, AuditRecord, Mode, Reason,
};
use countersign_verify::{ActionDetail, Actor, ApprovedBy, Claims, Presence, ACTION_DETAIL_TYPE};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::AppState;

/// What the page asks to be signed (`countersign::countersignature::MintRequest`). Unknown fields are
/// refused: nothing the page sends is signed unless it is read here.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MintBody {
    pub(crate) call: u64,
    pub(crate) tool_call_id: String,
    pub(crate) action: String,
    pub(crate) kind: countersign::Kind,
    pub(crate) args_sha256: String,
    pub(crate) card_sha256: Option<String>,
    pub(crate) approved_by: ApprovedBy,
    pub(crate) grant: Option<u64>,
    pub(crate) session: String,
    pub(crate) role: String,
    /// The presence the action needs (default `click`).
    #[serde(default = "click")]
    pub(crate) presence: Presence,
    /// Who asked for the call (default the page's assistant).
    #[serde(default)]
    pub(crate) caller: countersign::Caller,
    /// For `passkey`: the ceremony from `/v1/countersign/challenge` and the browser's
    /// assertion (`PublicKeyCredential.toJSON()`).
    #[serde(default)]
    pub(crate) assertion: Option<Assertion>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Assertion {
    ceremony: String,
    credential: Value,
}

fn click() -> Presence {
    Presence::Click
}

impl MintBody {
    /// The token's `authorization_details` entry, before a passkey names itself.
    fn detail(&self) -> ActionDetail {
        ActionDetail {
            type_: ACTION_DETAIL_TYPE.into(),
            action: self.action.clone(),
            kind: self.kind,
            call: self.call,
            tool_call_id: self.tool_call_id.clone(),
            args_sha256: self.args_sha256.clone(),
            card_sha256: self.card_sha256.clone(),
            decision: self.approved_by,
            grant: self.grant,
            session: self.session.clone(),
            role: self.role.clone(),
            presence: self.presence,
            passkey: None,
        }
    }

    /// The SHA-256 of the binding: the canonical JSON (RFC 8785) of the token's
    /// `authorization_details` entry, with who asked. A passkey challenge is derived from
    /// it, and the assertion must come back with the same: an approval of "once" cannot
    /// become a grant, nor one call another.
    pub(crate) fn binding(&self) -> [u8; 32] {
        let binding = json!({ "detail": self.detail(), "act": Actor { sub: self.caller } });
        let hex = countersign::audit::ArgsDigest::of_value(&binding).to_hex();
        countersign_verify::log::from_hex(&hex).unwrap_or_default()
    }
}

fn parse_body(state: &AppState, body: &[u8]) -> Result<MintBody, ApiError> {
    let body: MintBody = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("the body is not a countersignature request ({e})"),
        )
    })?;
    check(&body)?;
    // INVARIANT: a `window` token is minted only by the approval window, and an action
    // the server's declarations approve there gets no other token, whatever the page says.
    if body.presence == Presence::Window || window_only(state, &body.role, &body.action) {
        let at = state
            .window
            .as_deref()
            .map(|w| format!(" at {}", w.origin()))
            .unwrap_or_default();
        return Err(ApiError::new(
            ErrorCode::WindowRequired,
            format!("`{}` is approved only in the Countersign approval window{at}, with the approver's passkey; the page cannot mint its countersignature", body.action),
        ));
    }
    Ok(body)
}

/// `POST /v1/countersign/challenge`: for a call that needs passkey presence, the options
/// for `navigator.credentials.get`, with a challenge derived from its binding.
pub(crate) async fn challenge(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let body = parse_body(&state, &body)?;
    if body.presence != Presence::Passkey || body.assertion.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a challenge is for a passkey countersignature, before its assertion",
        ));
    }
    let passkeys = super::passkeys::enabled(&state)?;
    if !super::passkeys::valid_user(&body.role) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`role` is not a passkey user",
        ));
    }
    let (ceremony, options) = passkeys
        .start_approval(&body.role, body.binding())
        .map_err(|e| super::passkeys::refusal(&e))?;
    Ok(Json(json!({ "ceremony": ceremony, "options": options })))
}

/// Whether `role`'s calls of `action` are approved only in the approval window: the
/// server's declarations say so, or the deployment's policy file raises them there
/// (without a window, nothing then mints for them).
pub(crate) fn window_only(state: &AppState, role: &str, action: &str) -> bool {
    let declared = state
        .window
        .as_deref()
        .and_then(|w| w.presence(role, action))
        == Some(Presence::Window);
    let raised = state
        .config
        .policy
        .as_deref()
        .and_then(|text| countersign::policy::PolicyFile::from_json(text).ok())
        .is_some_and(|file| {
            file.presence(role, action) == countersign::countersignature::Presence::Window
        });
    declared || raised
}

/// The public key set. No auth: public keys are public; the seed is never served.
pub(crate) async fn jwks(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        Json(state.signer.jwks()),
    )
}

/// Mints a token for the approval the body describes. The audit record is appended
/// (durably) first: no record, no token.
pub(crate) async fn mint(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let body = parse_body(&state, &body)?;
    // INVARIANT: a passkey token is minted only after the person's user-verified
    // assertion over a challenge derived from exactly this binding.
    let passkey = match (body.presence, &body.assertion) {
        (Presence::Click, None) => None,
        (Presence::Click, Some(_)) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "an assertion comes only with presence `passkey`",
            ))
        }
        (Presence::Passkey, None) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "presence `passkey` needs an assertion (ask /v1/countersign/challenge first)",
            ))
        }
        // Refused in `parse_body`.
        (Presence::Window, _) => {
            return Err(ApiError::new(
                ErrorCode::WindowRequired,
                "a `window` countersignature is minted only in the approval window",
            ))
        }
        (Presence::Passkey, Some(assertion)) => {
            let verified = super::passkeys::enabled(&state)?
                .finish_approval(
                    &body.role,
                    body.binding(),
                    &assertion.ceremony,
                    &assertion.credential,
                )
                .map_err(|e| super::passkeys::refusal(&e))?;
            Some(verified.credential)
        }
    };
    // A passkey says who approved: the role it is registered for.
    let sub = passkey.as_ref().map(|_| body.role.clone());
    let minted = issue(&state, &body, passkey, sub).await?;
    Ok(Json(json!({
        "countersignature": minted.token,
        "id": minted.jti,
        "expires_at": minted.expires_at,
        "presence": body.presence,
    })))
}

/// A token minted, and its record written.
pub(crate) struct Minted {
    /// The compact JWS.
    pub(crate) token: String,
    /// Its id.
    pub(crate) jti: String,
    /// When it expires (seconds since the epoch).
    pub(crate) expires_at: u64,
}

/// Mints the token `body` describes, after appending its audit record (durably): no
/// record, no token. `passkey` is the credential that verified, `sub` who it names (the
/// approver, for the window; written to the record too).
pub(crate) async fn issue(
    state: &AppState,
    body: &MintBody,
    passkey: Option<String>,
    sub: Option<String>,
) -> Result<Minted, ApiError> {
    let mut jti = [0u8; 16];
    getrandom::fill(&mut jti)
        .map_err(|_| ApiError::new(ErrorCode::AuditUnavailable, "no randomness for a token id"))?;
    let jti: String = jti.iter().map(|b| format!("{b:02x}")).collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let iat = now.as_secs();
    let detail = ActionDetail {
        passkey: passkey.clone(),
        ..body.detail()
    };
    // Who approved, and how, only where a passkey showed it: a click is the page's word.
    let (sub, amr) = match passkey {
        Some(_) => (sub, vec!["pop".into(), "mfa".into()]),
        None => (None, Vec::new()),
    };
    let approver = (body.presence == Presence::Window)
        .then(|| sub.clone())
        .flatten();
    let claims = Claims {
        iss: state.config.issuer.clone(),
        sub,
        aud: state.config.audience.clone(),
        iat,
        nbf: iat,
        exp: iat + state.config.countersign_ttl.as_secs().max(1),
        jti: jti.clone(),
        act: Actor { sub: body.caller },
        amr,
        authorization_details: vec![detail],
        log_index: None,
    };
    let at_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
    // INVARIANT: the trail gets the keyed digest; only the token carries the plain one.
    let args_digest = state.audit.key().countersigned_digest(&body.args_sha256);
    let mut record = record_of(body, &jti, at_ms, args_digest)?;
    record.approver = approver;
    let appended = state.audit.append(vec![record]).await.map_err(|e| {
        tracing::error!(error = %e, "audit append failed; no countersignature minted");
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the audit trail could not record the approval, so no countersignature was minted",
        )
    })?;
    // Where the record is in the verifiable log: a backend can ask for its inclusion.
    let claims = Claims {
        log_index: (appended.appended == 1).then(|| appended.last_seq.saturating_sub(1)),
        ..claims
    };
    let token = state.signer.sign(&claims).map_err(|_| {
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the token could not be encoded",
        )
    })?;
    // An MCP client's call: the client gets the token with the result.
    if claims.act.sub == countersign::Caller::Mcp {
        let approved = crate::relay::Approved {
            token: token.clone(),
            jti: jti.clone(),
            passkey: body.presence != Presence::Click,
        };
        let _ = state.relay.attach_approval(
            &body.tool_call_id,
            &body.action,
            &body.args_sha256,
            approved,
        );
    }
    Ok(Minted {
        token,
        jti,
        expires_at: claims.exp,
    })
}

/// The request's words, checked: ids as the executor makes them, digests as hex.
pub(crate) fn check(body: &MintBody) -> Result<(), ApiError> {
    let bad = |what: &str| ApiError::new(ErrorCode::InvalidRequest, format!("`{what}` is invalid"));
    // No control, bidi or invisible format characters: these land in the trail and in
    // a token a backend may log.
    let printable = |s: &str, max: usize| {
        !s.is_empty()
            && s.len() <= max
            && !s.chars().any(|c| {
                c.is_control()
                    || countersign::text::is_bidi_control(c)
                    || countersign::text::is_format_char(c)
            })
    };
    let hex64 =
        |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !printable(&body.tool_call_id, 128) {
        return Err(bad("tool_call_id"));
    }
    let id_ok = !body.action.is_empty()
        && body.action.len() <= countersign::executor::MAX_ACTION_ID_LEN
        && body
            .action
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        return Err(bad("action"));
    }
    if !hex64(&body.args_sha256) {
        return Err(bad("args_sha256"));
    }
    if !body.card_sha256.as_deref().is_none_or(hex64) {
        return Err(bad("card_sha256"));
    }
    if !printable(&body.session, 128) {
        return Err(bad("session"));
    }
    if !printable(&body.role, 64) {
        return Err(bad("role"));
    }
    // A grant decision names its grant; a card's own decision shows its card.
    match (body.approved_by, body.grant, &body.card_sha256) {
        (ApprovedBy::Grant, None, _) => Err(bad("grant")),
        (ApprovedBy::Once | ApprovedBy::Batch, Some(_), _) => Err(bad("grant")),
        (ApprovedBy::Once | ApprovedBy::Batch, None, None) => Err(bad("card_sha256")),
        _ => Ok(()),
    }
}

/// The trail's record of a mint: the call, the decision and the token's id, with the
/// arguments as `args_digest`, keyed ([`crate::ChainKey::countersigned_digest`]).
fn record_of(
    claims: &MintBody,
    jti: &str,
    at_ms: u64,
    args_digest: String,
) -> Result<AuditRecord, ApiError> {
    let grant: Option<GrantId> = claims
        .grant
        .map(|g| serde_json::from_value(json!(g)))
        .transpose()
        .map_err(|_| ApiError::new(ErrorCode::InvalidRequest, "`grant` is invalid"))?;
    let reason = match (claims.approved_by, grant) {
        (ApprovedBy::Once, _) => Reason::AllowedOnce,
        (ApprovedBy::Batch, _) => Reason::AllowedInBatch,
        // The card that made the grant, or a later call the grant covered.
        (ApprovedBy::Grant, Some(grant)) if claims.card_sha256.is_some() => {
            Reason::Granted { grant }
        }
        (ApprovedBy::Grant, Some(grant)) => Reason::Grant { grant },
        (ApprovedBy::Grant, None) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "`grant` is missing",
            ))
        }
    };
    Ok(AuditRecord {
        id: format!("{}-countersigned-{}", claims.session, jti),
        seq: 0,
        session: claims.session.as_str().into(),
        role: claims.role.as_str().into(),
        at_ms,
        call: claims.call,
        tool_call_id: claims.tool_call_id.as_str().into(),
        caller: claims.caller,
        action: claims.action.as_str().into(),
        kind: Some(claims.kind),
        confirm: None,
        policy: None,
        mode: Mode::Default,
        stage: Stage::Approve,
        event: AuditEvent::Countersigned,
        decided_by: Decider::Person,
        outcome: None,
        summary: crate::summary::summary(&reason),
        grant,
        reason,
        args_digest,
        duration_ms: 0,
        countersignature: Some(jti.to_owned()),
        approver: None,
        trace: None,
    })
}
