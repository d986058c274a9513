"""Test and benchmark harness: real `streamlit run` and nginx servers on free ports (server.py) and a reader that
opens a page over Streamlit's websocket as a browser does (reader.py). Not part of the site; tests, benchmarks and
scripts import it from the repository root."""
