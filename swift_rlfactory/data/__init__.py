"""Data files and QA datasets: JSON Lines reading, QA record readers, reference answers."""
