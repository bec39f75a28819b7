//! A real browser for the portal's tests: Debian's Chromium, headless, driven
//! through its ChromeDriver over WebDriver (fantoccini).
//!
//! Missing Chromium or ChromeDriver are installed on first use
//! (`prerequisites::browser`); where they cannot be, a test that needs them
//! fails, saying what to install — it never passes without having looked at a
//! page.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::helpers::free_port;

/// How long a page may take to show what a step waits for.
const PATIENCE: Duration = Duration::from_secs(20);

/// What the last steps of starting a browser need, should they fail.
const INSTALL: &str = "the portal's browser tests need Chromium and ChromeDriver: \
                       apt-get install -y chromium chromium-driver";

/// The accessibility checker, injected into pages by the tests only.
const AXE: &str = include_str!("../fixtures/axe/axe.min.js");

/// The ChromeDriver process, killed when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Browser {
    pub client: Client,
    webdriver: String,
    _profile: tempdir::Dir,
    _driver: Driver,
}

/// A profile directory of its own for each browser, removed afterwards.
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Self {
            let path =
                std::env::temp_dir().join(format!("hookline-chromium-{}", ulid::Ulid::new()));
            std::fs::create_dir_all(&path).unwrap();
            Self(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Browser {
    /// A fresh headless Chromium with a window of `width` × `height`, in English.
    pub async fn start(width: u32, height: u32) -> Self {
        Self::start_in("en-US", width, height).await
    }

    /// A fresh headless Chromium whose language (`navigator.languages`,
    /// `Accept-Language`) is `language`.
    pub async fn start_in(language: &str, width: u32, height: u32) -> Self {
        let (chromium, chromedriver) = crate::prerequisites::browser();
        let port = free_port();
        let driver = Driver(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("starting chromedriver: {e}; {INSTALL}")),
        );
        let profile = tempdir::Dir::new();
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-extensions",
                    format!("--lang={language}"),
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.0.display()),
                ],
                "prefs": {"intl.accept_languages": language},
            },
        });
        // Chromium's windows are at least 500 px wide: a phone is emulated.
        let mut capabilities = capabilities;
        if width < 500 {
            capabilities["goog:chromeOptions"]["mobileEmulation"] =
                json!({"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}});
        }
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let webdriver = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&webdriver)
                .await
            {
                Ok(client) => break client,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("no browser session through chromedriver: {error}; {INSTALL}"),
            }
        };
        Self {
            client,
            webdriver,
            _profile: profile,
            _driver: driver,
        }
    }

    /// Lets the page's origin read and write the clipboard (the tests read back
    /// what it copied): WebDriver's permissions extension, for the origin of
    /// the page open now, which fantoccini does not wrap.
    pub async fn allow_clipboard(&self) {
        let session = self.client.session_id().await.unwrap().expect("a session");
        for name in ["clipboard-read", "clipboard-write"] {
            let granted = reqwest::Client::new()
                .post(format!("{}/session/{session}/permissions", self.webdriver))
                .json(&json!({"descriptor": {"name": name}, "state": "granted"}))
                .send()
                .await
                .unwrap();
            assert!(
                granted.status().is_success(),
                "granting {name}: {}",
                granted.status()
            );
        }
    }

    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// What the clipboard holds (after [`Browser::allow_clipboard`]).
    pub async fn clipboard(&self) -> String {
        let text = self
            .client
            .execute_async(
                "const done = arguments[0]; navigator.clipboard.readText().then(done, e => done('error: ' + e));",
                vec![],
            )
            .await
            .unwrap();
        text.as_str().unwrap_or_default().to_owned()
    }

    /// Opens a portal link and clicks "Continue", which spends its code.
    pub async fn open_link(&self, url: &str) {
        self.open(url).await;
        self.click("[data-test=continue]").await;
    }

    /// The first element matching `css`, once there is one.
    pub async fn wait_for(&self, css: &str) -> Element {
        let found = self
            .client
            .wait()
            .at_most(PATIENCE)
            .every(Duration::from_millis(50))
            .for_element(Locator::Css(css))
            .await;
        match found {
            Ok(element) => element,
            Err(error) => panic!("waiting for {css}: {error}\n{}", self.visible_text().await),
        }
    }

    /// Every element matching `css` now (none is an empty list).
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap()
    }

    pub async fn click(&self, css: &str) {
        self.wait_for(css).await.click().await.unwrap();
    }

    /// Types `text` into the field matching `css`, replacing what it held.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.wait_for(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Sends `keys` (text, or WebDriver key codes such as `\u{E004}` Tab,
    /// `\u{E007}` Enter, `\u{E015}` ArrowDown) to whatever has the focus: a
    /// keyboard-only walk.
    pub async fn press(&self, keys: &str) {
        self.client
            .active_element()
            .await
            .unwrap()
            .send_keys(keys)
            .await
            .unwrap();
    }

    /// The focused element's `data-test`, else its id (empty when neither).
    pub async fn focused(&self) -> String {
        let named = self
            .run("const e = document.activeElement; return e.dataset.test || e.id || '';")
            .await;
        named.as_str().unwrap_or_default().to_owned()
    }

    /// Chooses the option with `value` in the select matching `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.wait_for(css)
            .await
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("choosing {value} in {css}: {e}"));
    }

    /// Waits until the text of the element matching `css` satisfies `check`; that text.
    pub async fn wait_text(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut last = String::new();
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                if let Ok(text) = element.text().await {
                    if check(&text) {
                        return text;
                    }
                    last = text;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {css} to show {what}; it shows {last:?}\npage: {}",
                self.visible_text().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `count(css)` satisfies `check`; the elements.
    pub async fn wait_count(
        &self,
        css: &str,
        what: &str,
        check: impl Fn(usize) -> bool,
    ) -> Vec<Element> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let found = self.all(css).await;
            if check(found.len()) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} ({css}: {} now)\npage: {}",
                found.len(),
                self.visible_text().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The page's visible text, for failure messages.
    pub async fn visible_text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Runs axe-core on the page as it is: no serious or critical violation.
    pub async fn check_accessibility(&self, screen: &str) {
        let installed = self
            .client
            .execute("return typeof window.axe === 'object';", vec![])
            .await
            .unwrap();
        if installed != Value::Bool(true) {
            self.client.execute(AXE, vec![]).await.unwrap();
        }
        let result = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, {resultTypes: ['violations']})
                    .then(r => done(r.violations.map(v => ({
                        id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.map(n => n.html).slice(0, 3)}))))
                    .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));",
                vec![],
            )
            .await
            .unwrap();
        let serious: Vec<&Value> = result
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect();
        assert!(
            serious.is_empty(),
            "{screen}: accessibility violations: {}",
            serde_json::to_string_pretty(&serious).unwrap()
        );
    }

    /// The texts on the page (and in the attributes people hear: labels,
    /// titles, placeholders, and the column names a phone shows from
    /// `data-label`) still in English in a page of another language:
    /// every word of Latin letters outside data — `code`, `pre`,
    /// `translate="no"` elements, and the bidi isolates (U+2068 … U+2069)
    /// the portal sets values into its sentences with — except the
    /// technical names a translation keeps (HTTP, JSON, Slack, 4xx, …).
    pub async fn english_left(&self) -> Vec<String> {
        let found = self
            .run(
                r#"const KEPT = /^(HTTP|HTTPS|URL|JSON|TLS|mTLS|OAuth2|API|POST|GET|Slack|Microsoft|Teams|Discord|Retry-After|curl|Bearer|Basic|SMTP|jq|[2345]xx|webhook-id|webhook-timestamp|webhook-signature|Standard|Webhooks|v1)$/;
                   const DATA = 'script, style, code, pre, kbd, samp, textarea, [translate="no"], [hidden]';
                   const words = (text) => {
                     let rest = text;
                     for (let before = null; before !== rest; ) { before = rest; rest = rest.replace(/\u2068[^\u2068\u2069]*\u2069/g, ' '); }
                     return (rest.match(/[A-Za-z0-9-]*[A-Za-z][A-Za-z0-9-]*/g) ?? []).filter((w) => !KEPT.test(w));
                   };
                   const found = [];
                   const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
                   for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                     if (node.parentElement?.closest(DATA)) continue;
                     if (words(node.data).length) found.push(node.data.trim());
                   }
                   for (const el of document.querySelectorAll('[aria-label], [title], [placeholder], [alt], [data-label]')) {
                     if (el.closest(DATA)) continue;
                     for (const name of ['aria-label', 'title', 'placeholder', 'alt', 'data-label']) {
                       const value = el.getAttribute(name);
                       if (value && words(value).length) found.push(`${name}="${value}"`);
                     }
                   }
                   if (words(document.title).length) found.push(`<title>${document.title}`);
                   return found;"#,
            )
            .await;
        found
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    /// With `HOOKLINE_PORTAL_SCREENSHOTS=1`, writes the page to `docs/portal/{name}.png`.
    pub async fn screenshot(&self, name: &str) {
        if std::env::var_os("HOOKLINE_PORTAL_SCREENSHOTS").is_none() {
            return;
        }
        let png = self.client.screenshot().await.unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/portal");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Evaluates `script` (which may `return` a value) in the page.
    pub async fn run(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}
