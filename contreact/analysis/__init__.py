"""Research analysis: reflection similarity, metrics tables, PEI, reports."""
