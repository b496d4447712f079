//! The page's clock, read here and passed into the sans-IO core.

use countersign::Timestamp;

/// Now, in milliseconds since the page loaded (`performance.now()`, monotonic),
/// falling back to `Date.now()` where there is no `performance`.
///
/// Never `std::time::Instant::now()`: it panics on `wasm32-unknown-unknown`.
pub(crate) fn now() -> Timestamp {
    let millis = web_sys::window()
        .and_then(|w| w.performance())
        .map_or_else(js_sys::Date::now, |p| p.now());
    // A clock reading is finite and non-negative; clamp anything else to 0.
    let millis = if millis.is_finite() && millis > 0.0 {
        millis as u64
    } else {
        0
    };
    Timestamp::from_millis(millis)
}

/// 32 bytes from `crypto.getRandomValues`, for the executor's card nonces. `None` if the
/// page has no Web Crypto (the caller then refuses to start rather than use weak nonces).
pub(crate) fn random_secret() -> Option<[u8; 32]> {
    let crypto = web_sys::window()?.crypto().ok()?;
    let mut bytes = [0u8; 32];
    crypto.get_random_values_with_u8_array(&mut bytes).ok()?;
    Some(bytes)
}

/// A fresh W3C `traceparent` (random trace and span ids, sampled) for one model request;
/// `None` without Web Crypto.
pub(crate) fn new_traceparent() -> Option<String> {
    let bytes = random_secret()?;
    let hex = |part: &[u8]| part.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let traceparent = format!(
        "00-{}-{}-01",
        hex(bytes.get(..16)?),
        hex(bytes.get(16..24)?)
    );
    countersign::call::is_traceparent(&traceparent).then_some(traceparent)
}
