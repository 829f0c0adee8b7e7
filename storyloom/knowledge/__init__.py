"""Knowledge bases of CAIU entries: files, activation, references, retrieval, imports."""
