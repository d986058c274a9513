"""What every page of the site shares: the frame (language, navigation, data source, provenance),
Streamlit cache wrappers around kvcore, and chart export. Reader texts live in kvsite/i18n/*.yaml."""
