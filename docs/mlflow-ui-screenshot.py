"""Screenshot of the MLflow UI (3.17): the sweep's parent run, Artifacts tab, report/report.html open; assistant panel closed.

How docs/mlflow-ui-sweep-report.png was taken, with the distribution's chromium-driver:
``mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --port 5056`` then
``python docs/mlflow-ui-screenshot.py "http://127.0.0.1:5056/#/experiments/1/runs/PARENT/artifacts/report/report.html" shot.png``.
"""
import sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
url, out = sys.argv[1], sys.argv[2]
o = webdriver.ChromeOptions()
for f in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800"):
    o.add_argument(f)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
d.get(url)
time.sleep(10)
close = [b for b in d.find_elements(By.CSS_SELECTOR, "button[aria-label]") if b.is_displayed() and "close" in (b.get_attribute("aria-label") or "").lower()]
if close:
    close[-1].click(); time.sleep(2)
d.save_screenshot(out)
d.quit()
