//! The bundle as a network failure or an attacker on the way would change it: the page
//! works without its Countersign layer, and does not start without its own files.

use countersign_e2e::{ensure, Outcome, Ui};

use super::{Change, Which};

/// A copy of the bundle in `dist`, in `tmp/{name}`, with each file `which` picks
/// replaced by what `change` makes of it (`None`: left out), as a network failure or an
/// attacker on the way would. An error if `which` picks no file (for the lazy part: the
/// Countersign layer is then not split off, and the page waits for all of it).
pub(crate) fn bundle_changed(
    dist: &std::path::Path,
    tmp: &std::path::Path,
    name: &str,
    which: Which,
    change: Change,
) -> Result<std::path::PathBuf, String> {
    let to = tmp.join(format!("dist-{}", name.replace('/', "-")));
    std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
    let mut changed = 0;
    for entry in std::fs::read_dir(dist).map_err(|e| format!("{}: {e}", dist.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if !entry.path().is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|e| format!("{file}: {e}"))?;
        let bytes = if which(&file) {
            changed += 1;
            change(bytes)
        } else {
            Some(bytes)
        };
        if let Some(bytes) = bytes {
            std::fs::write(to.join(&file), bytes).map_err(|e| format!("{file}: {e}"))?;
        }
    }
    ensure(
        changed > 0,
        format!(
            "{name}: the release bundle has no such file (is the Countersign layer split off?)"
        ),
    )?;
    Ok(to)
}

/// A file changed so that it still works as before, so only its integrity can tell: a
/// custom section appended to wasm, a comment to JS.
pub(crate) fn valid_but_changed(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    if bytes.starts_with(b"\0asm") {
        bytes.extend_from_slice(&[0, 10, 1, b'x']);
        bytes.extend_from_slice(b"tampered");
    } else {
        bytes.extend_from_slice(b"\n// tampered\n");
    }
    Some(bytes)
}

/// A page whose main wasm, main script or split loader changed on the way does not
/// start: nothing of it runs, so neither the page nor its gate can be someone else's.
pub(crate) async fn the_page_does_not_start(ui: &Ui<'_>) -> Outcome {
    ui.client
        .goto(&format!("{}/?lang=en", ui.base))
        .await
        .map_err(|e| format!("could not open the page: {e}"))?;
    // Long enough for the page to start (it does in under a second here).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    ensure(
        ui.count("#current-name").await? == 0 && ui.count(".cs-dock").await? == 0,
        "the page started",
    )
}

/// The settings page needs nothing from the Countersign layer to work: with the layer's
/// wasm part not fetched, or refused for its integrity, no dock and no gate run; the
/// page renames by its own Save button and says in place of the dock that the assistant
/// could not be loaded (the failed load is not a panic that would stop the page's wasm).
pub(crate) async fn the_page_works_without_its_countersign_layer(ui: &Ui<'_>) -> Outcome {
    ui.client
        .goto(&format!("{}/?lang=en", ui.base))
        .await
        .map_err(|e| format!("could not open the page: {e}"))?;
    ui.wait_for("#current-name").await?;
    ui.wait_text(".fatal[role='alert']", "could not be loaded")
        .await?;
    ensure(ui.count(".cs-dock").await? == 0, "no dock without its part")?;
    ui.type_into("#workspace-name", " Two").await?;
    ui.click("#save-name").await?;
    ui.wait_text("#current-name", "Atlas Two").await?;
    ui.shot("the-page-without-its-layer").await
}
