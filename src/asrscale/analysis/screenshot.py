"""A report as a laptop shows it: headless Chromium (Debian's chromium and chromium-driver,
through Selenium) opens the page from disk at 1,366 × 900 pixels and saves what it shows. The
README's screenshot is made by this, from the default study's report, and so is the one the test
suite checks the tiny study's report with. The PNG records what it shows (its `Source`: the
report's title) and the template's digest it was rendered from (`Template`), so a test can tell
a screenshot older than the report's layout."""

import hashlib
import shutil
from importlib import resources
from pathlib import Path

from asrscale.errors import UserError

TEMPLATE = resources.files("asrscale.analysis") / "report.html.jinja"
SIZE = (1366, 900)  # a laptop's screen


def template_digest() -> str:
    """The report template's sha256 (its first 16 digits): what a screenshot's layout rests on."""
    return hashlib.sha256(TEMPLATE.read_bytes()).hexdigest()[:16]


def browser():
    """Headless Chromium at a laptop's size, through its WebDriver."""
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if not all(found):
        raise UserError(
            "a screenshot needs Debian's chromium and chromium-driver (apt-get install chromium "
            "chromium-driver) and selenium (pip install -e '.[test]')"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--window-size={SIZE[0]},{SIZE[1]}",
        "--disable-background-networking",
        "--no-first-run",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(found[1]), options=options)


def capture(report: Path, out: Path, driver=None) -> None:
    """The top of `report` as a laptop shows it, saved to `out` with what it shows recorded."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    own = driver is None
    driver = driver or browser()
    try:
        driver.get(Path(report).resolve().as_uri())
        title = driver.title
        shot = out.with_suffix(".raw.png")
        driver.save_screenshot(str(shot))
    finally:
        if own:
            driver.quit()
    info = PngInfo()
    info.add_text("Source", title)
    info.add_text("Template", template_digest())
    info.add_text("Software", "asrscale.analysis.screenshot")
    Image.open(shot).save(out, pnginfo=info)
    shot.unlink()


def recorded(png: Path) -> dict:
    """What a screenshot of `capture` recorded: Source, Template, Software."""
    from PIL import Image

    return dict(Image.open(png).text)
