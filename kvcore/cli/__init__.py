"""The command line: `python -m kvcore calc|presets|chips|selftest|doctor|probe|record|decode|quality`."""
