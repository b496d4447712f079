//! ChromeDriver and a small vocabulary for driving the page as a person would.

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Map, Value};
use tokio::process::{Child, Command};

const CHROME_ARGS: [&str; 11] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--window-size=1280,900",
    // WebMCP (`document.modelContext`): the page registers its actions as tools there.
    "--enable-features=WebMCP",
];

/// A running ChromeDriver with one headless Chromium session.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    _driver: Child,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Browser")
    }
}

impl Browser {
    /// The page at `base` (an app served by the test, offline assistant), its
    /// screenshots under `target/e2e-screenshots` named with `prefix`.
    pub fn ui(&self, base: String, prefix: &'static str) -> Result<Ui<'_>, String> {
        let shots = crate::workspace_root()
            .join("target")
            .join("e2e-screenshots");
        std::fs::create_dir_all(&shots).map_err(|e| e.to_string())?;
        Ok(Ui {
            client: &self.client,
            base,
            shots,
            offline: true,
            prefix,
        })
    }

    /// Starts ChromeDriver on a free loopback port and opens a headless session.
    pub async fn start() -> Result<Self, String> {
        Self::start_with(&[]).await
    }

    /// Starts a session with `extra` Chromium flags too (e.g. `--force-dark-mode`, which
    /// makes pages see `prefers-color-scheme: dark`).
    pub async fn start_with(extra: &[&str]) -> Result<Self, String> {
        let driver_path = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("chromedriver is not installed; run `cargo xtask setup`")?;
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            probe.local_addr().map_err(|e| e.to_string())?.port()
        };
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .kill_on_drop(true)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start chromedriver ({e})"))?;
        let url = format!("http://127.0.0.1:{port}");
        let mut caps = Map::new();
        let mut chrome = Map::new();
        let args: Vec<&str> = CHROME_ARGS
            .iter()
            .copied()
            .chain(extra.iter().copied())
            .collect();
        chrome.insert("args".into(), json!(args));
        if std::path::Path::new("/usr/bin/chromium").is_file() {
            chrome.insert("binary".into(), json!("/usr/bin/chromium"));
        }
        caps.insert("goog:chromeOptions".into(), Value::Object(chrome));
        let mut last = String::new();
        for _ in 0..100 {
            match ClientBuilder::native()
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    return Ok(Self {
                        client,
                        _driver: driver,
                    })
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("could not open a browser session: {last}"))
    }
}

/// The page under test, with the folder its screenshots go to.
#[derive(Debug)]
pub struct Ui<'a> {
    /// The WebDriver session.
    pub client: &'a Client,
    /// The server's base URL.
    pub base: String,
    /// Where screenshots go.
    pub shots: PathBuf,
    /// Whether the offline assistant is expected (no model behind the page).
    pub offline: bool,
    /// A prefix for screenshot names (which pass of the suite this is).
    pub prefix: &'static str,
}

/// How long a wait for the page may take.
pub const WAIT: Duration = Duration::from_secs(10);

impl Ui<'_> {
    /// Opens the tutorial (`lang` is `en` or `zh`) in a fresh tab (a fresh
    /// `sessionStorage`: no pending card or chat of an earlier scenario comes back) and
    /// waits for the dock.
    pub async fn open(&self, lang: &str) -> Result<(), String> {
        let fail = |e: fantoccini::error::CmdError| format!("could not open a fresh tab: {e}");
        let new = self.client.new_window(true).await.map_err(fail)?;
        self.client.close_window().await.map_err(fail)?;
        self.client
            .switch_to_window(new.handle)
            .await
            .map_err(fail)?;
        self.navigate(lang).await
    }

    /// Reloads the page, as a person pressing F5 would (the tab's `sessionStorage` stays).
    pub async fn reload(&self) -> Result<(), String> {
        self.client
            .refresh()
            .await
            .map_err(|e| format!("could not reload: {e}"))?;
        self.wait_for(".cs-dock").await?;
        self.wait_for("#current-name").await
    }

    /// Opens the tutorial in this tab.
    pub async fn navigate(&self, lang: &str) -> Result<(), String> {
        self.client
            .goto(&format!("{}/?lang={lang}", self.base))
            .await
            .map_err(|e| format!("could not open the page: {e}"))?;
        self.wait_for(".cs-dock").await?;
        self.wait_for("#current-name").await
    }

    /// Waits until an element matches `css`.
    pub async fn wait_for(&self, css: &str) -> Result<(), String> {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .map(|_| ())
            .map_err(|_| format!("`{css}` never appeared"))
    }

    /// Waits until no element matches `css`.
    pub async fn wait_gone(&self, css: &str) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if self.count(css).await? == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("`{css}` never went away"))
    }

    /// Waits until the text of `css` contains `needle`.
    pub async fn wait_text(&self, css: &str, needle: &str) -> Result<String, String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut last = String::new();
        while tokio::time::Instant::now() < deadline {
            last = self.text(css).await.unwrap_or_default();
            if last.contains(needle) {
                return Ok(last);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "`{css}` never contained {needle:?}; it shows {last:?}"
        ))
    }

    /// The text of the last element matching `css`.
    pub async fn text(&self, css: &str) -> Result<String, String> {
        let all = self
            .client
            .find_all(Locator::Css(css))
            .await
            .map_err(|e| e.to_string())?;
        match all.last() {
            Some(el) => el.text().await.map_err(|e| e.to_string()),
            None => Err(format!("no `{css}`")),
        }
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> Result<usize, String> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.len())
            .map_err(|e| e.to_string())
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) -> Result<(), String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}` to click"))?;
        el.click()
            .await
            .map_err(|e| format!("could not click `{css}`: {e}"))
    }

    /// Opens the dock's settings (notifications, passkey, MCP pairing), as a person
    /// would with the header's control; nothing happens if they are open.
    pub async fn open_settings(&self) -> Result<(), String> {
        if self
            .eval("return document.querySelector('.cs-settings').open")
            .await?
            != Value::Bool(true)
        {
            self.click(".cs-settings__toggle").await?;
        }
        Ok(())
    }

    /// Types into the element matching `css`, as keystrokes.
    pub async fn type_into(&self, css: &str, text: &str) -> Result<(), String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}` to type into"))?;
        el.send_keys(text)
            .await
            .map_err(|e| format!("could not type into `{css}`: {e}"))
    }

    /// Empties an input.
    pub async fn clear(&self, css: &str) -> Result<(), String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}` to clear"))?;
        el.clear()
            .await
            .map_err(|e| format!("could not clear `{css}`: {e}"))
    }

    /// The `value` of an input.
    pub async fn value(&self, css: &str) -> Result<String, String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}`"))?;
        el.prop("value")
            .await
            .map_err(|e| e.to_string())
            .map(Option::unwrap_or_default)
    }

    /// Whether the element matching `css` has `class`.
    pub async fn has_class(&self, css: &str, class: &str) -> Result<bool, String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}`"))?;
        let classes = el
            .attr("class")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        Ok(classes.split_whitespace().any(|c| c == class))
    }

    /// Sends a message to the assistant through the dock's chat.
    pub async fn say(&self, text: &str) -> Result<(), String> {
        self.type_into(".cs-input", text).await?;
        self.click(".cs-send").await
    }

    /// The assistant's latest answer, once it contains `needle`.
    pub async fn answer_contains(&self, needle: &str) -> Result<String, String> {
        self.wait_text(".cs-msg--assistant", needle).await
    }

    /// Saves a screenshot as `<name>.png` in the screenshot folder.
    pub async fn shot(&self, name: &str) -> Result<(), String> {
        let png = self.client.screenshot().await.map_err(|e| e.to_string())?;
        std::fs::write(self.shots.join(format!("{}{name}.png", self.prefix)), png)
            .map_err(|e| e.to_string())
    }

    /// Whether the element matching `css` is displayed.
    pub async fn displayed(&self, css: &str) -> Result<bool, String> {
        let el = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|_| format!("no `{css}`"))?;
        el.is_displayed().await.map_err(|e| e.to_string())
    }

    /// Checks the assistant badge: "Offline assistant" without a model, hidden with one.
    pub async fn check_badge(&self, offline_text: &str) -> Result<(), String> {
        if self.offline {
            self.wait_text(".cs-badge--offline", offline_text)
                .await
                .map(|_| ())
        } else {
            // The page learns about the model from the gateway shortly after loading.
            let deadline = tokio::time::Instant::now() + WAIT;
            while tokio::time::Instant::now() < deadline {
                if !self.displayed(".cs-badge--offline").await? {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err("the offline badge stayed although a model answers".into())
        }
    }

    /// Resizes the window.
    pub async fn size(&self, width: u32, height: u32) -> Result<(), String> {
        self.client
            .set_window_size(width, height)
            .await
            .map_err(|e| e.to_string())
    }

    /// Runs axe-core (installed from npm by `cargo xtask setup` into `target/tools`) on
    /// the element matching `css`; returns the serious and critical violations as
    /// `rule: n nodes (first target)`.
    pub async fn axe(&self, css: &str) -> Result<Vec<String>, String> {
        let script = crate::workspace_root().join("target/tools/node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&script).map_err(|e| {
            format!(
                "axe-core is not installed at {} ({e}); run `cargo xtask setup`",
                script.display()
            )
        })?;
        self.client
            .execute(&source, vec![])
            .await
            .map_err(|e| format!("could not load axe-core: {e}"))?;
        let run = format!(
            "const done = arguments[arguments.length - 1];
             axe.run(document.querySelector({css:?}), {{ resultTypes: ['violations'] }})
               .then(r => done(r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => v.id + ': ' + v.nodes.length + ' nodes (' + JSON.stringify(v.nodes[0].target) + ')')))
               .catch(e => done(['axe failed: ' + e]));"
        );
        let found = self
            .client
            .execute_async(&run, vec![])
            .await
            .map_err(|e| format!("axe did not run: {e}"))?;
        Ok(found
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Presses keys on the keyboard, wherever the focus is (WebDriver actions: the
    /// focused element gets them, as from a person's keyboard). Key codes: `\u{E004}`
    /// Tab, `\u{E007}` Enter; a modifier (`\u{E008}` Shift) stays down until the end.
    pub async fn keys(&self, keys: &str) -> Result<(), String> {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        let modifier = |c: char| ('\u{E008}'..='\u{E00A}').contains(&c) || c == '\u{E03D}';
        let mut actions = KeyActions::new("keyboard".into());
        let mut held = Vec::new();
        for c in keys.chars() {
            actions = actions.then(KeyAction::Down { value: c });
            if modifier(c) {
                held.push(c);
            } else {
                actions = actions.then(KeyAction::Up { value: c });
            }
        }
        for c in held.into_iter().rev() {
            actions = actions.then(KeyAction::Up { value: c });
        }
        self.client
            .perform_actions(actions)
            .await
            .map_err(|e| format!("could not press keys: {e}"))?;
        // Let the page react before the next look.
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(())
    }

    /// An attribute of the focused element (empty if it has none).
    pub async fn focused_attr(&self, name: &str) -> Result<String, String> {
        let focused = self
            .client
            .active_element()
            .await
            .map_err(|e| format!("nothing has the focus: {e}"))?;
        Ok(focused
            .attr(name)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default())
    }

    /// The class attribute of the focused element.
    pub async fn focused_class(&self) -> Result<String, String> {
        let focused = self
            .client
            .active_element()
            .await
            .map_err(|e| format!("nothing has the focus: {e}"))?;
        Ok(focused
            .attr("class")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default())
    }

    /// Runs a script in the page and returns its result.
    pub async fn eval(&self, script: &str) -> Result<Value, String> {
        self.client
            .execute(script, vec![])
            .await
            .map_err(|e| e.to_string())
    }
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl Into<String>) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message.into())
    }
}

/// A WebDriver extension command (W3C WebAuthn: virtual authenticators).
#[derive(Debug)]
struct WebAuthnCommand {
    path: String,
    method: http::Method,
    body: Option<Value>,
}

impl fantoccini::wd::WebDriverCompatibleCommand for WebAuthnCommand {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/webauthn/{}",
            session_id.unwrap_or_default(),
            self.path
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            self.method.clone(),
            self.body.as_ref().map(Value::to_string),
        )
    }
}

/// A virtual authenticator in the browser (ChromeDriver's WebAuthn extension): a
/// platform passkey provider with user verification, whose verification the test turns
/// on and off.
#[derive(Debug)]
pub struct Authenticator<'a> {
    client: &'a Client,
    id: String,
}

impl<'a> Authenticator<'a> {
    /// Adds one: CTAP2, internal, resident keys, user verification that succeeds.
    pub async fn add(client: &'a Client) -> Result<Self, String> {
        let answer = client
            .issue_cmd(WebAuthnCommand {
                path: "authenticator".into(),
                method: http::Method::POST,
                body: Some(json!({
                    "protocol": "ctap2",
                    "transport": "internal",
                    "hasResidentKey": true,
                    "hasUserVerification": true,
                    "isUserConsenting": true,
                    "isUserVerified": true,
                })),
            })
            .await
            .map_err(|e| format!("could not add a virtual authenticator: {e}"))?;
        let id = answer
            .as_str()
            .or_else(|| answer.get("authenticatorId").and_then(Value::as_str))
            .ok_or_else(|| format!("no authenticator id in {answer}"))?
            .to_owned();
        Ok(Self { client, id })
    }

    /// Whether the authenticator verifies the person (PIN, biometrics) when asked.
    pub async fn set_user_verified(&self, verified: bool) -> Result<(), String> {
        self.client
            .issue_cmd(WebAuthnCommand {
                path: format!("authenticator/{}/uv", self.id),
                method: http::Method::POST,
                body: Some(json!({ "isUserVerified": verified })),
            })
            .await
            .map(|_| ())
            .map_err(|e| format!("could not set user verification: {e}"))
    }

    /// Removes it.
    pub async fn remove(self) -> Result<(), String> {
        self.client
            .issue_cmd(WebAuthnCommand {
                path: format!("authenticator/{}", self.id),
                method: http::Method::DELETE,
                body: None,
            })
            .await
            .map(|_| ())
            .map_err(|e| format!("could not remove the authenticator: {e}"))
    }
}
