// Impairment model (issue 3): being written.
