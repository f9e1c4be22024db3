"""Walks the site service's page in Debian's chromium, headless, driven by Selenium.

Run by SitePageRigTests with one JSON argument: url, server certificate (the browser trusts
exactly that key), the manager's and the viewer's logins, the room to notify, the key to put the
new type on, and a folder for screenshots. Prints one JSON line of what the page showed; every
check is the Swift test's, which reads these facts.
"""
import base64
import hashlib
import json
import subprocess
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

args = json.loads(sys.argv[1])
facts = {"screenshots": []}

der = subprocess.run(["openssl", "x509", "-in", args["certificate"], "-pubkey", "-noout"], capture_output=True, check=True).stdout
spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=der, capture_output=True, check=True).stdout
pin = base64.b64encode(hashlib.sha256(spki).digest()).decode()

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900",
             f"--ignore-certificate-errors-spki-list={pin}", f"--user-data-dir={tempfile.mkdtemp()}", f"--lang={args['lang']}"]:
    options.add_argument(flag)
options.add_experimental_option("prefs", {"intl.accept_languages": args["lang"]})
driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
wait = WebDriverWait(driver, 15)


def shot(name):
    path = f"{args['screenshots']}/page-{name}.png"
    driver.save_screenshot(path)
    facts["screenshots"].append(path)


def visible(element_id):
    return wait.until(seen.visibility_of_element_located((By.ID, element_id)))


def login(name, password):
    visible("login-name").clear()
    driver.find_element(By.ID, "login-name").send_keys(name)
    driver.find_element(By.ID, "login-password").clear()
    driver.find_element(By.ID, "login-password").send_keys(password)
    driver.find_element(By.ID, "login-submit").click()


def apply_previewed(name, photograph=True):
    visible("preview")
    facts[name + "_preview"] = driver.find_element(By.ID, "preview-list").text
    if photograph:
        shot(name + "-preview")
    driver.find_element(By.ID, "apply").click()
    visible("result")
    wait.until(lambda d: d.find_element(By.ID, "result-list").text)
    facts[name + "_result"] = driver.find_element(By.ID, "result-title").text
    facts[name + "_published"] = driver.find_element(By.ID, "result-list").text
    if photograph:
        shot(name + "-applied")


try:
    driver.get(args["url"])
    visible("login-form")
    shot("login")
    login(args["manager"], args["manager_password"] + "x")
    wait.until(lambda d: d.find_element(By.ID, "login-error").text)
    facts["wrong_password"] = driver.find_element(By.ID, "login-error").text

    login(args["manager"], args["manager_password"])
    visible("site-view")
    wait.until(lambda d: d.find_element(By.ID, "site-version").text)
    facts["version_before"] = driver.find_element(By.ID, "site-version").text
    shot("overview")

    # A new notification type for one room.
    driver.find_element(By.CSS_SELECTOR, "[data-tab=notifications]").click()
    visible("notification-form")
    driver.find_element(By.ID, "n-label").send_keys(args["label"])
    driver.find_element(By.ID, "n-text").send_keys(args["text"])
    driver.find_element(By.CSS_SELECTOR, f"input[name=recipient][value={args['room']}]").click()
    Select(driver.find_element(By.ID, "n-tone")).select_by_value("bell")
    shot("notification-form")
    driver.find_element(By.ID, "n-preview").click()
    apply_previewed("notification")
    facts["notification_rows"] = driver.find_element(By.ID, "notification-table").text

    # On a key of every terminal.
    driver.find_element(By.CSS_SELECTOR, "[data-tab=keys]").click()
    visible("key-form")
    Select(driver.find_element(By.ID, "k-key")).select_by_value(args["key"])
    action = Select(driver.find_element(By.ID, "k-action"))
    action.select_by_visible_text(next(o.text for o in action.options if args["label"] in o.text))
    driver.find_element(By.ID, "k-preview").click()
    apply_previewed("key")
    facts["key_rows"] = driver.find_element(By.ID, "key-table").text

    # Undone (the key is free again), then the version before the undo restored (it is back).
    driver.find_element(By.ID, "undo").click()
    apply_previewed("undo")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=versions]").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#version-table tbody tr")) >= 4)
    driver.find_element(By.XPATH, "//table[@id='version-table']//tr[td[1]='4']//button").click()
    apply_previewed("restore")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#version-table tbody tr")) >= 5)
    facts["versions"] = driver.find_element(By.ID, "version-table").text
    facts["version_after"] = driver.find_element(By.ID, "site-version").get_attribute("textContent")
    shot("versions")

    # Terminals: each pending one approved with the code read at it, then one revoked.
    driver.find_element(By.CSS_SELECTOR, "[data-tab=terminals]").click()
    for n, (room, code) in enumerate(args["approve"]):
        visible(f"code-{room}").send_keys(code)
        driver.find_element(By.ID, f"approve-{room}").click()
        apply_previewed(f"approve_{room}", photograph=n == 0)
        wait.until(lambda d: d.find_elements(By.ID, f"revoke-{room}"))
    # The table refreshes itself: each approved terminal shows as reachable now once the site's
    # member has heard it under its new key (seconds on a loaded machine). What it showed last is
    # kept either way.
    now = driver.execute_script("return t('seen-now')")
    facts["terminals_approved"] = driver.find_element(By.ID, "terminal-table").text
    try:
        WebDriverWait(driver, 45).until(lambda d: [c.text for c in d.find_elements(
            By.CSS_SELECTOR, "#terminal-table td.seen")].count(now) >= len(args["approve"]))
    finally:
        facts["terminals_approved"] = driver.find_element(By.ID, "terminal-table").text
    # How each is doing, told by the terminal itself every 10 s (the member hears it once the
    # terminal seals by its own key).
    fine = driver.execute_script("return t('health-ok')")
    try:
        WebDriverWait(driver, 30).until(lambda d: sum(c.text.startswith(fine) for c in d.find_elements(
            By.CSS_SELECTOR, "#terminal-table td.health")) >= len(args["approve"]))
    finally:
        facts["terminal_health"] = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#terminal-table td.health")]
    shot("terminals")
    # A terminal's speaker and microphone tested from here: its loopback test, and the plot.
    driver.find_element(By.ID, f"loopback-{args['room']}").click()
    try:
        WebDriverWait(driver, 40).until(lambda d: d.find_element(By.ID, "loopback-state").get_attribute("class") in ("took", "unreached"))
        WebDriverWait(driver, 10).until(lambda d: d.execute_script(
            "const i = document.getElementById('loopback-plot'); return i.hidden || (i.complete && i.naturalWidth > 0)"))
    finally:
        facts["loopback_state"] = driver.find_element(By.ID, "loopback-state").text
        facts["loopback_plot_shown"] = driver.execute_script(
            "const i = document.getElementById('loopback-plot'); return !i.hidden && i.complete && i.naturalWidth > 0")
    shot("loopback")
    driver.find_element(By.ID, f"revoke-{args['revoke']}").click()
    apply_previewed("revoke")
    wait.until(lambda d: not d.find_elements(By.ID, f"revoke-{args['revoke']}"))
    facts["terminals_after_revoke"] = driver.find_element(By.ID, "terminal-table").text
    facts["version_final"] = driver.find_element(By.ID, "site-version").get_attribute("textContent")

    # The live board: who is reachable, then a test of the new type sent from the page, and what
    # the terminals say of it as it happens (the event stream).
    driver.find_element(By.CSS_SELECTOR, "[data-tab=live]").click()
    wait.until(lambda d: args["live_room_name"] in d.find_element(By.ID, "presence-table").text)
    driver.find_element(By.CSS_SELECTOR, "[data-tab=notifications]").click()
    visible(f"test-{args['live_type']}").click()
    visible("message")
    facts["test_sent"] = driver.find_element(By.ID, "message").text
    # "Anhören": the type's tone and text, made by the service, played in the browser.
    driver.find_element(By.ID, f"listen-{args['live_type']}").click()
    wait.until(lambda d: d.execute_script("return heard !== null && heard.currentTime > 0.3"))
    facts["listened"] = driver.execute_script(
        "return {duration: heard.duration, played: heard.currentTime, error: heard.error ? heard.error.code : null}")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=live]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#event-list li[data-event=notification_sent]"))
    facts["live_presence"] = driver.find_element(By.ID, "presence-table").text
    facts["live_events"] = driver.find_element(By.ID, "event-list").text
    shot("live")

    # Call buttons, a group and who may call whom, each previewed in words and applied; the new
    # button on a key; then the whole site's history, with the test just sent.
    driver.find_element(By.CSS_SELECTOR, "[data-tab=calling]").click()
    visible("group-form")
    driver.find_element(By.ID, "g-name").send_keys(args["group_name"])
    for room in args["group_rooms"]:
        driver.find_element(By.CSS_SELECTOR, f"input[name=g-room][value={room}]").click()
    driver.find_element(By.ID, "g-preview").click()
    apply_previewed("group")
    driver.find_element(By.ID, "b-label").send_keys(args["call_label"])
    driver.find_element(By.CSS_SELECTOR, f"input[name=b-room][value={args['room']}]").click()
    Select(driver.find_element(By.ID, "b-kind")).select_by_value("call")
    driver.find_element(By.ID, "b-preview").click()
    apply_previewed("button")
    Select(driver.find_element(By.ID, "p-room")).select_by_value(args["room"])
    for box in driver.find_elements(By.CSS_SELECTOR, "input[name=p-callee]"):
        if box.is_selected() != (box.get_attribute("value") in args["room_may_call"]):
            box.click()
    driver.find_element(By.ID, "p-preview").click()
    apply_previewed("permission")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=calling]").click()
    wait.until(lambda d: args["call_label"] in d.find_element(By.ID, "button-table").text)
    facts["buttons"] = driver.find_element(By.ID, "button-table").text
    facts["groups"] = driver.find_element(By.ID, "group-table").text
    facts["permissions"] = driver.find_element(By.ID, "permission-table").text
    shot("calling")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=keys]").click()
    visible("key-form")
    Select(driver.find_element(By.ID, "k-key")).select_by_value(args["call_key"])
    Select(driver.find_element(By.ID, "k-action")).select_by_visible_text(f"ruft „{args['call_label']}“")
    driver.find_element(By.ID, "k-preview").click()
    apply_previewed("call_key", photograph=False)
    facts["version_calling"] = driver.find_element(By.ID, "site-version").get_attribute("textContent")

    # One terminal's own keys and lights: a key and a light at one room alone.
    Select(driver.find_element(By.ID, "k-scope")).select_by_value(args["own_room"])
    wait.until(lambda d: args["own_room_name"] in d.find_element(By.ID, "k-hint").text)
    facts["own_hint_before"] = driver.find_element(By.ID, "k-hint").text
    Select(driver.find_element(By.ID, "k-key")).select_by_value(args["own_key"])
    Select(driver.find_element(By.ID, "k-action")).select_by_value("toggle_dnd")
    driver.find_element(By.ID, "k-preview").click()
    apply_previewed("own_key")
    wait.until(lambda d: not d.find_element(By.ID, "k-reset").get_attribute("hidden"))
    facts["own_hint_after"] = driver.find_element(By.ID, "k-hint").text
    facts["own_keys"] = driver.find_element(By.ID, "key-table").text
    Select(driver.find_element(By.ID, "l-state")).select_by_value("dnd")
    driver.find_element(By.ID, "l-led").send_keys(args["own_led"])
    Select(driver.find_element(By.ID, "l-pattern")).select_by_value("steady")
    driver.find_element(By.ID, "l-preview").click()
    apply_previewed("light", photograph=False)
    wait.until(lambda d: d.find_elements(By.ID, "light-dnd"))
    facts["own_lights"] = driver.find_element(By.ID, "light-table").text
    shot("keys-lights")
    Select(driver.find_element(By.ID, "k-scope")).select_by_value("")
    facts["shared_keys"] = driver.find_element(By.ID, "key-table").text
    facts["shared_lights"] = driver.find_element(By.ID, "light-table").text
    facts["version_own"] = driver.find_element(By.ID, "site-version").get_attribute("textContent")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=history]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#history-table tbody tr[id^=history-]"))
    facts["history"] = driver.find_element(By.ID, "history-table").text
    shot("history")

    # A viewer sees the site but no change on offer; the change she sends anyway (the request the
    # manager's page sends, from her logged-in page) is refused.
    driver.find_element(By.ID, "logout").click()
    login(args["viewer"], args["viewer_password"])
    visible("site-view")
    driver.find_element(By.CSS_SELECTOR, "[data-tab=notifications]").click()
    wait.until(lambda d: "Material" in d.find_element(By.ID, "notification-table").text)
    facts["viewer_sees_types"] = driver.find_element(By.ID, "notification-table").text
    facts["viewer_form_shown"] = driver.find_element(By.ID, "notification-form").is_displayed()
    facts["viewer_status"] = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        api("PATCH", "site", {version: site.version, edits: [{path: ["notifications", "tee"], value: {recipients: ["roomb"]}}]})
          .then(() => done("applied"), (e) => { refused(e); done(String(e.status)); });""")
    visible("message")
    facts["viewer_refused"] = driver.find_element(By.ID, "message").text
    shot("viewer-refused")
    facts["ok"] = True
except Exception as error:  # the facts so far, and what stopped the walk
    facts["ok"] = False
    facts["error"] = f"{type(error).__name__}: {error}"
    try:
        shot("failure")
    except Exception:
        pass
finally:
    driver.quit()
print(json.dumps(facts))
