"""Servers across turns and users: what a local server keeps between requests (its prompt cache, its slots), what
it resumes and reprocesses, what it prints, and the memory that takes (kvcore.servers.ledger)."""
