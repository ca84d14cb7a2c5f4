"""A study: a batch's models × replicates, driven here or on many machines through a queue.

`batch` plans a study from its config and drives its runs, each in a process of its own
(`fork_server`); `queue` puts them on a job queue in the runs' PostgreSQL for workers
anywhere; `status` follows a study's runs from the database.
"""
