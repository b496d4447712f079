//! The browser's WebAuthn, in its JSON forms: options from the gateway go through
//! `PublicKeyCredential.parse{Creation,Request}OptionsFromJSON`, and the credential comes
//! back as `credential.toJSON()`. No key material passes through the page's code.

use js_sys::{Function, Object, Reflect, JSON};
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn get(target: &JsValue, key: &str) -> Result<JsValue, String> {
    Reflect::get(target, &key.into()).map_err(describe)
}

fn describe(value: JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| format!("{}: {}", String::from(e.name()), String::from(e.message())))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| "the browser refused".into())
}

/// Whether this browser can do what the passkey flow needs.
pub(crate) fn supported() -> bool {
    web_sys::window()
        .and_then(|w| Reflect::get(&w, &"PublicKeyCredential".into()).ok())
        .is_some_and(|pkc| {
            Reflect::has(&pkc, &"parseRequestOptionsFromJSON".into()).unwrap_or(false)
        })
}

/// `navigator.credentials.create` (`create == true`) or `.get` with the gateway's
/// options (`{"publicKey": …}`); the credential's `toJSON()`.
pub(crate) async fn ceremony(options: &Value, create: bool) -> Result<Value, String> {
    let window: JsValue = web_sys::window().ok_or("no window")?.into();
    let pkc = get(&window, "PublicKeyCredential")?;
    let parse_name = if create {
        "parseCreationOptionsFromJSON"
    } else {
        "parseRequestOptionsFromJSON"
    };
    let parse: Function = get(&pkc, parse_name)?
        .dyn_into()
        .map_err(|_| "this browser cannot read passkey options".to_owned())?;
    let public_key = options
        .get("publicKey")
        .ok_or("no publicKey in the options")?;
    let json = JSON::parse(&public_key.to_string()).map_err(describe)?;
    let parsed = parse.call1(&pkc, &json).map_err(describe)?;
    let request = Object::new();
    Reflect::set(&request, &"publicKey".into(), &parsed).map_err(describe)?;
    let credentials = get(&get(&window, "navigator")?, "credentials")?;
    let method: Function = get(&credentials, if create { "create" } else { "get" })?
        .dyn_into()
        .map_err(|_| "this browser has no WebAuthn".to_owned())?;
    let promise: js_sys::Promise = method
        .call1(&credentials, &request)
        .map_err(describe)?
        .dyn_into()
        .map_err(|_| "WebAuthn did not answer".to_owned())?;
    let credential = JsFuture::from(promise).await.map_err(describe)?;
    let to_json: Function = get(&credential, "toJSON")?
        .dyn_into()
        .map_err(|_| "the credential has no toJSON".to_owned())?;
    let out = to_json.call0(&credential).map_err(describe)?;
    let text = JSON::stringify(&out)
        .map_err(describe)?
        .as_string()
        .ok_or("the credential is not JSON")?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}
