//! The web UI (spec: query §6.18): `/` (the page), `/s/<file>` (its script and style sheet), `/favicon.ico`.
//!
//! The assets are the files in `src/server/ui/`, compiled into the binary (`include_str!`), hand-written
//! JavaScript and CSS with no build step and nothing fetched from elsewhere, so the UI works offline and a
//! release binary is the whole deployment. Edit the files and rebuild to change the UI.
//!
//! `/s/...` answers as OpenTSDB's static-file handler does: a year of caching unless the name contains
//! `nocache`, 400 for `..`, 404 for unknown names. The page asks for `s/app.js?v=<hash of the assets>`, so a new
//! binary's assets are never hidden by a browser's cache.
use std::sync::LazyLock;

use hyper::StatusCode;

use super::reply::{Reply, HTML};
use super::request::ApiRequest;

const INDEX: &str = include_str!("ui/index.html");
const APP_JS: &str = include_str!("ui/app.js");
const APP_CSS: &str = include_str!("ui/app.css");
const FAVICON: &[u8] = include_bytes!("ui/favicon.ico");

/// The page with its asset links stamped with the assets' hash (FNV-1a: cheap, and only has to change when
/// the files do).
static PAGE: LazyLock<String> = LazyLock::new(|| {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in APP_JS.bytes().chain(APP_CSS.bytes()) {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    INDEX.replace("{{version}}", &format!("{:012x}", hash & 0xffff_ffff_ffff))
});

/// `/`: the single-page UI. The query it shows lives in the URL's fragment, which the server never sees.
pub fn index() -> Reply {
    Reply::new(StatusCode::OK, HTML, PAGE.as_str()).with_header("Cache-Control", "no-cache".to_string())
}

/// `/favicon.ico`.
pub fn favicon() -> Reply {
    Reply::new(StatusCode::OK, "image/x-icon", FAVICON).with_header("Cache-Control", "max-age=31536000".into())
}

/// `/s/<path>`: the embedded assets.
pub fn static_file(path: &[&str], req: &ApiRequest) -> Reply {
    let json = req.has("json");
    if path.contains(&"..") {
        return Reply::page_error(StatusCode::BAD_REQUEST, "Malformed path", json);
    }
    let name = path.join("/");
    let (body, content_type): (&'static [u8], &'static str) = match name.as_str() {
        "app.js" => (APP_JS.as_bytes(), "application/javascript; charset=UTF-8"),
        "app.css" => (APP_CSS.as_bytes(), "text/css; charset=UTF-8"),
        "favicon.ico" => (FAVICON, "image/x-icon"),
        _ => return Reply::page_not_found(json),
    };
    let max_age = if name.contains("nocache") { 0 } else { 31_536_000 };
    Reply::new(StatusCode::OK, content_type, body).with_header("Cache-Control", format!("max-age={max_age}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_its_assets_by_content_hash() {
        assert!(!PAGE.contains("{{version}}"));
        let v = PAGE.split("s/app.js?v=").nth(1).map(|s| &s[..12]).unwrap();
        assert!(v.bytes().all(|b| b.is_ascii_hexdigit()), "{v}");
        assert!(PAGE.contains(&format!("s/app.css?v={v}")));
    }
}
