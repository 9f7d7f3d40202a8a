"""The checks after a run: mixing (R̂, ESS), bias (Stein identities), run-away and hot
chains, and the quantities they judge."""
