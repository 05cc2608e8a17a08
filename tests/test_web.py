"""The family's web page (enlace/web/index.html) in headless Chromium against `python -m enlace.serve` with a
random-init model: a streamed answer, memories saved and deleted through the page and seen by the API, one
person's memories hidden from another, a person's data deleted; each person signing in with their PIN (a session
cookie no script reads, kept across reloads, ended by «Salir»); the household's token when the server asks for one,
and the data export downloaded with it. Debian's chromium and chromedriver, passed by path: nothing is downloaded
(SE_OFFLINE, no Selenium Manager)."""
import json
import shutil
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import torch

from enlace.checkpoint import export_model
from enlace.config import load_layer
from enlace.household import Household
from enlace.model import Transformer
from enlace.tokenizer import Tokenizer

from conftest import ROOT, get, served

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(CHROMEDRIVER is None, reason="chromedriver is not installed (apt-get install chromium-driver)"),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
pytest.importorskip("fastapi", reason="enlace.serve needs fastapi (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="enlace.serve needs uvicorn (pip install -e '.[serve]')")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT = 30  # seconds for anything the page does


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    "A real model file that writes 'a' after anything: blocks that add nothing, and tied embeddings that all lean"
    # towards the embedding of 'a' (a random model mostly writes specials, which the person never sees)
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    model = Transformer(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("attn.wo.weight", "mlp.w_down.weight")):
                p.zero_()
        lean = torch.ones(cfg.d_model)
        model.embed.weight.copy_(lean + 0.1 * torch.randn_like(model.embed.weight))
        model.embed.weight[ord("a")] = 5 * lean
    return export_model(model, tmp_path_factory.mktemp("web"), Tokenizer.bytes())






@pytest.fixture
def browser(tmp_path, monkeypatch):
    monkeypatch.setenv("SE_OFFLINE", "true")  # never let Selenium Manager look for a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=900,800",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(tmp_path / "downloads"),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait(driver, condition, message, timeout=WAIT):
    # an element read while the page reloads (after «Salir») is stale: read it again at the next poll
    ignored = (StaleElementReferenceException,)
    return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=ignored).until(condition, message)


def text_of(driver, css) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).get_property("textContent")


def people(driver) -> list[str]:
    "Waits for #person to be filled from the household; returns its options."
    wait(driver, lambda d: d.find_element(By.ID, "person").is_enabled(), "the people never filled #person")
    return [o.get_attribute("value") for o in Select(driver.find_element(By.ID, "person")).options]


def script_errors(driver) -> list[str]:
    "The page's JavaScript errors so far (refused requests are logged as network errors: those are expected)."
    return [e["message"] for e in driver.get_log("browser") if e.get("source") != "network"]


def memories_of(driver, person):
    "Waits for the memories list of `person` to be loaded; returns its text."
    wait(driver, lambda d: d.find_element(By.ID, "memories").get_attribute("data-user") == person,
         f"the memories of {person} never loaded")
    return text_of(driver, "#memories")


def sign_in(driver, name, secret):
    "Waits for the sign-in form; types `name` (may be empty: the household's token) and `secret`, and sends them."
    wait(driver, lambda d: d.find_element(By.ID, "token").is_displayed(), "the page never asked who this is")
    field = driver.find_element(By.ID, "login-name")
    field.clear()
    field.send_keys(name)
    driver.find_element(By.ID, "token").send_keys(secret)
    driver.find_element(By.ID, "token-save").click()


def test_chat_streams_and_memories_round_trip(model_file, tmp_path, browser):
    (tmp_path / "token").write_text("s3creto-de-la-casa\n")
    token = "s3creto-de-la-casa"  # the household's: the page may act for every member
    with served(model_file, tmp_path / "state", "--token-file", tmp_path / "token", token=token) as url:
        d = browser
        d.get(url + "/")
        sign_in(d, "", token)
        assert {"ana", "luis"} <= set(people(d))
        Select(d.find_element(By.ID, "person")).select_by_value("ana")
        memories_of(d, "ana")

        # a streamed answer: every change of the assistant bubble's text is recorded while it streams
        d.execute_script("""
            window.__texts = [];
            new MutationObserver(() => {
              const b = [...document.querySelectorAll('#answer .msg.assistant')].pop();
              const t = b ? b.querySelector('.text').textContent : '';
              if (t && t !== window.__texts[window.__texts.length - 1]) window.__texts.push(t);
            }).observe(document.getElementById('answer'), {subtree: true, childList: true, characterData: true});
        """)
        d.find_element(By.ID, "message").send_keys("hola, ¿qué tal?")
        d.find_element(By.ID, "send").click()
        wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#answer .msg.user"), "no user bubble")
        assert text_of(d, "#answer .msg.user") == "hola, ¿qué tal?"
        wait(d, lambda d: text_of(d, "#answer .msg.assistant .text"), "the assistant bubble never got text")
        wait(d, lambda d: d.find_element(By.ID, "send").is_enabled(), "the answer never finished", timeout=60)
        assert not d.find_element(By.ID, "stop").is_enabled()
        assert text_of(d, "#error") == ""
        texts = d.execute_script("return window.__texts")
        assert texts and texts[-1] == text_of(d, "#answer .msg.assistant .text"), texts
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:])), texts  # appended delta by delta
        assert len(texts) >= 2, texts  # streamed: the answer grew in several events, not all at once
        assert d.find_element(By.ID, "message").get_property("value") == ""

        # a memory saved through the form is listed and in the API; its delete button removes it from both
        api = f"{url}/v1/household/memories?user=ana"
        d.find_element(By.ID, "memory-text").send_keys("Me gusta el café sin azúcar")
        d.find_element(By.ID, "memory-save").click()
        wait(d, lambda d: "Me gusta el café sin azúcar" in text_of(d, "#memories"), "the saved memory is not listed")
        status, body = get(api, token)
        saved = [m for m in body["memories"] if m["text"] == "Me gusta el café sin azúcar"]
        assert status == 200 and len(saved) == 1, body
        d.find_element(By.CSS_SELECTOR, f".memory-delete[data-id='{saved[0]['id']}']").click()
        wait(d, lambda d: "Me gusta el café" not in text_of(d, "#memories"), "the deleted memory is still listed")
        assert all(m["id"] != saved[0]["id"] for m in get(api, token)[1]["memories"])

        # luis sees none of ana's memories, nor her conversation; back to ana, a new conversation clears it
        d.find_element(By.ID, "memory-text").send_keys("El martes tengo dentista")
        d.find_element(By.ID, "memory-save").click()
        wait(d, lambda d: "dentista" in text_of(d, "#memories"), "the second memory is not listed")
        Select(d.find_element(By.ID, "person")).select_by_value("luis")
        assert "dentista" not in memories_of(d, "luis")
        assert not d.find_elements(By.CSS_SELECTOR, "#answer .msg")
        Select(d.find_element(By.ID, "person")).select_by_value("ana")
        assert "dentista" in memories_of(d, "ana")
        assert len(d.find_elements(By.CSS_SELECTOR, "#answer .msg")) == 2
        d.find_element(By.ID, "new").click()
        assert not d.find_elements(By.CSS_SELECTOR, "#answer .msg")
        assert text_of(d, "#error") == ""

        # "Borrar todos mis datos", confirmed: luis leaves the household and the page
        Select(d.find_element(By.ID, "person")).select_by_value("luis")
        d.execute_script("window.confirm = () => true")
        d.find_element(By.ID, "erase").click()
        wait(d, lambda d: "luis" not in people(d), "luis is still offered after his data was deleted")
        assert "luis" not in get(f"{url}/v1/household", token)[1]["people"] and text_of(d, "#error") == ""
        assert not script_errors(d)


def test_token_is_asked_for_then_sent(model_file, tmp_path, browser):
    (tmp_path / "token").write_text("s3creto-de-la-casa\n")
    args = ["--token-file", tmp_path / "token", "--host", "127.0.0.1"]
    with served(model_file, tmp_path / "state", *args, token="s3creto-de-la-casa") as url:
        assert get(url + "/v1/household")[0] == 401
        d = browser
        d.get(url + "/")
        wait(d, lambda d: d.find_element(By.ID, "token").is_displayed(), "the page never asked for the token")
        d.find_element(By.ID, "token").send_keys("otra-clave")
        d.find_element(By.ID, "token-save").click()
        wait(d, lambda d: "no son correctos" in text_of(d, "#auth-hint"), "a wrong token was not refused")
        assert d.find_element(By.ID, "token").is_displayed()
        d.find_element(By.ID, "token").send_keys("s3creto-de-la-casa")
        d.find_element(By.ID, "token-save").click()
        assert {"ana", "luis"} <= set(people(d))
        memories_of(d, d.find_element(By.ID, "person").get_property("value"))
        assert not d.find_element(By.ID, "auth").is_displayed() and text_of(d, "#error") == ""
        d.refresh()  # the token is kept in this browser
        people(d)
        memories_of(d, d.find_element(By.ID, "person").get_property("value"))
        assert not d.find_element(By.ID, "auth").is_displayed()

        # "Descargar mis datos": the export is fetched with the token and saved as a JSON file
        Select(d.find_element(By.ID, "person")).select_by_value("ana")
        d.find_element(By.ID, "export").click()
        saved = tmp_path / "downloads" / "enlace-ana.json"
        wait(d, lambda d: saved.exists() and saved.stat().st_size, "the export was not downloaded")
        assert json.loads(saved.read_text(encoding="utf-8"))["person"] == "ana" and text_of(d, "#error") == ""
        assert not script_errors(d)


def test_each_person_signs_in_with_their_pin(model_file, tmp_path, browser):
    "Issue 45: two people, 127.0.0.1, no household token: the page asks for a name and PIN, and shows only one's own."
    with Household.open(tmp_path / "state") as home:
        for name, pin in (("ana", "4821"), ("luis", "1357")):
            home.add_person(name)
            home.set_pin(name, pin)
        home.person("ana").memory_save("mi PIN del banco es 1234")
    with served(model_file, tmp_path / "state") as url:
        assert get(url + "/v1/household/memories?user=ana")[0] == 401  # no one may read Ana's memories unasked
        d = browser
        d.get(url + "/")
        sign_in(d, "ana", "0000")
        wait(d, lambda d: "no son correctos" in text_of(d, "#auth-hint"), "a wrong PIN was not refused")
        sign_in(d, "ana", "4821")
        assert people(d) == ["familia", "ana"]  # herself and the shared member: not luis
        assert d.find_element(By.ID, "person").get_property("value") == "ana"
        assert "mi PIN del banco es 1234" in memories_of(d, "ana")
        assert "enlace_session" not in d.execute_script("return document.cookie")  # HttpOnly: no script reads it
        d.refresh()  # the session stays on this device: no PIN again
        assert people(d) == ["familia", "ana"] and not d.find_element(By.ID, "auth").is_displayed()
        d.find_element(By.ID, "logout").click()
        wait(d, lambda d: "Has salido" in text_of(d, "#status"), "signing out said nothing")
        wait(d, lambda d: d.find_element(By.ID, "token").is_displayed(), "the page did not ask again after Salir")

        sign_in(d, "luis", "1357")  # luis on the same device: none of ana's
        assert people(d) == ["familia", "luis"]
        assert "banco" not in memories_of(d, "luis")
        d.execute_script("window.confirm = () => true")
        d.find_element(By.ID, "erase").click()  # luis erases himself: his session goes with him
        wait(d, lambda d: "Datos de luis borrados" in text_of(d, "#status"), "the erasure said nothing")
        wait(d, lambda d: d.find_element(By.ID, "token").is_displayed(), "the page did not ask who this is")
        assert not script_errors(d)
    with Household.open(tmp_path / "state") as home:
        assert home.people() == ["familia", "ana"] and len(home.person("ana").memories()) == 1


def test_a_reminder_that_falls_due_rings_on_the_open_page(model_file, tmp_path, browser):
    "Issue 46: the page listens; a reminder that falls due reaches it at once (not at the next 30-s poll), and the"
    # browser's notification shows it when the person allowed notifications (Notification stubbed: headless has none)
    with Household.open(tmp_path / "state") as home:
        home.add_person("ana")
        home.set_pin("ana", "4821")
    with served(model_file, tmp_path / "state") as url:
        d = browser
        d.get(url + "/")
        sign_in(d, "ana", "4821")
        people(d)
        memories_of(d, "ana")
        Select(d.find_element(By.ID, "person")).select_by_value("familia")  # the family's own reminders
        memories_of(d, "familia")
        d.execute_script("""
            window.__rung = [];
            window.Notification = class { constructor(title, options) { window.__rung.push(options.body); }
                                          static get permission() { return "granted"; } };
        """)
        soon = datetime.now(ZoneInfo("Europe/Madrid")) - timedelta(minutes=60) + timedelta(seconds=1)
        with Household.open(tmp_path / "state", clock=lambda: soon) as home:  # due one second from now
            home.person("familia").reminder_add("dentro de 60 minutos", "regar las plantas")
        wait(d, lambda d: d.execute_script("return window.__rung.length"), "the reminder never rang", timeout=20)
        assert d.execute_script("return window.__rung") == ["Ahora toca: regar las plantas"]
        wait(d, lambda d: "regar las plantas" in text_of(d, "#due"), "the banner does not show it")
        d.find_element(By.CSS_SELECTOR, "#reminders .reminder-delete").click()  # and it can be deleted
        wait(d, lambda d: "regar" not in text_of(d, "#reminders"), "the deleted reminder is still listed")
        assert not script_errors(d)
    with Household.open(tmp_path / "state") as home:
        assert home.person("familia").reminders() == {"pending": [], "due": []}
