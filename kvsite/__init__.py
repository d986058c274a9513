"""What every page of the site shares: the frame (language, navigation, data source, provenance),
Streamlit cache wrappers around kvcore, and how a chart is shown (kvsite.chart). Reader texts live in kvsite/i18n/*.yaml."""
