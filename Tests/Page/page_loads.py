"""Loads the site service's page again and again in Debian's chromium (headless, Selenium),
logged in, and prints the browser's own timings of each load as one JSON line: the page loaded
(navigation timing's loadEventEnd) and the site shown (the page's "site-shown" mark, after its
GET /api/v1/site), in ms from the navigation's start. Run by SuiteSiteServiceTests."""
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
from selenium.webdriver.support.ui import WebDriverWait

args = json.loads(sys.argv[1])
der = subprocess.run(["openssl", "x509", "-in", args["certificate"], "-pubkey", "-noout"], capture_output=True, check=True).stdout
spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=der, capture_output=True, check=True).stdout
pin = base64.b64encode(hashlib.sha256(spki).digest()).decode()
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900",
             f"--ignore-certificate-errors-spki-list={pin}", f"--user-data-dir={tempfile.mkdtemp()}"]:
    options.add_argument(flag)
driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
wait = WebDriverWait(driver, 15)
out = {"loaded": [], "shown": []}
try:
    driver.get(args["url"])
    wait.until(seen.visibility_of_element_located((By.ID, "login-name"))).send_keys(args["manager"])
    driver.find_element(By.ID, "login-password").send_keys(args["manager_password"])
    driver.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: d.find_element(By.ID, "site-version").text)
    for _ in range(args["count"]):
        driver.get(args["url"])
        shown = wait.until(lambda d: d.execute_script(
            "const m = performance.getEntriesByName('site-shown'); return m.length ? m[0].startTime : null;"))
        loaded = wait.until(lambda d: d.execute_script(
            "const n = performance.getEntriesByType('navigation')[0]; return n && n.loadEventEnd > 0 ? n.loadEventEnd : null;"))
        out["loaded"].append(loaded)
        out["shown"].append(shown)
finally:
    driver.quit()
print(json.dumps(out))
