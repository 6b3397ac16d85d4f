"""Tests of the SQLite store itself (its file, its indexes, its schema). What every turn store must do is the
parametrized suite of pps-turns (plugins/turns/tests), which runs on this store too."""
