"""Views and charts: the data frames each chapter draws and the Altair charts that draw them (no Streamlit)."""
