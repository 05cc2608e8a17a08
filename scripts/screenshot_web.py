"""A screenshot of the family's web page for the docs: `python -m enlace.serve` on a free port with a model file
(a random-init smoke model when none is given: its answer is gibberish), a shopping list and two reminders for ana
(one already due), two memories saved through the API, one message sent from headless Chromium (Debian's chromium
and chromedriver; nothing is downloaded). Writes docs/img/web.png (1200x800).
    python scripts/screenshot_web.py [MODEL_FILE] [--out docs/img/web.png] [--message TEXT]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def random_model(folder: Path) -> Path:
    "A random-init smoke model with the chat specials (like the tests' model_file)."
    import torch

    from enlace.checkpoint import export_model
    from enlace.config import load_layer
    from enlace.model import Transformer
    from enlace.tokenizer import Tokenizer

    torch.manual_seed(0)
    return export_model(Transformer(load_layer(ROOT / "configs/model/smoke.yaml", "model")), folder, Tokenizer.bytes())


PIN = "4821"  # ana's, for this picture only


def fill(state: Path) -> None:
    "The shared list, ana's PIN, reminders and memories, written before the server opens the state."
    from enlace.household import Household

    with Household.open(state) as home:
        home.add_person("ana")
        home.set_pin("ana", PIN)  # two people live here: the page asks who is speaking
        home.person("ana").list_add("compra", ["pan", "leche", "tomates", "café"])
        home.person("ana").reminder_add("el viernes a las 9", "llevar el coche al taller")
        for text in ("Le gusta el café sin azúcar", "Los martes juega al pádel con Luis"):
            home.person("ana").memory_save(text)
        earlier = home.now() - timedelta(hours=1)
    with Household.open(state, clock=lambda: earlier) as past:  # added an hour ago, due five minutes ago
        past.person("ana").reminder_add("dentro de 55 minutos", "llamar a la abuela")


def call(url: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def serve(model: Path, state: Path, log) -> tuple[subprocess.Popen, str]:
    "Start `python -m enlace.serve` on a free port and wait for /health; (process, base URL)."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "enlace.serve", str(model), "--state", str(state), "--port", str(port),
           "--person", "ana", "--person", "luis"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            call(url + "/health")
            return proc, url
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.3)
    proc.kill()
    log.seek(0)
    raise SystemExit(f"enlace.serve did not start:\n{log.read()[-3000:]}")


def shoot(url: str, out: Path, message: str, profile: Path) -> None:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for a browser or a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,800",
                 "--hide-scrollbars", "--lang=es-ES", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    d = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        # the page's viewport exactly 1200x800, whatever the headless window keeps for itself
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                          {"width": 1200, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        wait = WebDriverWait(d, 60, poll_frequency=0.1)
        d.get(url + "/")
        wait.until(lambda d: d.find_element(By.ID, "token").is_displayed())
        d.find_element(By.ID, "login-name").send_keys("ana")
        d.find_element(By.ID, "token").send_keys(PIN)
        d.find_element(By.ID, "token-save").click()
        wait.until(lambda d: d.find_element(By.ID, "person").is_enabled())
        Select(d.find_element(By.ID, "person")).select_by_value("ana")
        wait.until(lambda d: d.find_element(By.ID, "memories").get_attribute("data-user") == "ana")
        d.find_element(By.ID, "message").send_keys(message)
        d.find_element(By.ID, "send").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#answer .msg.assistant"))
        wait.until(lambda d: d.find_element(By.ID, "send").is_enabled())
        for details in d.find_elements(By.CSS_SELECTOR, "#answer details"):
            details.click()
        d.find_element(By.ID, "message").send_keys("¿Y qué tengo que hacer el viernes?")
        time.sleep(0.3)
        out.parent.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(out))
    finally:
        d.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="a model file (default: a random-init smoke model)")
    ap.add_argument("--out", default=str(ROOT / "docs/img/web.png"))
    ap.add_argument("--message", default="¿Qué hay en la lista de la compra?")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = Path(args.model).resolve() if args.model else random_model(tmp)
        fill(tmp / "state")
        with (tmp / "serve.log").open("w+") as log:
            proc, url = serve(model, tmp / "state", log)
            try:
                shoot(url, Path(args.out), args.message, tmp / "profile")
            finally:
                proc.terminate()
                proc.wait(10)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
