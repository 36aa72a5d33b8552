"""What zarrfs ships for the tests of code built on it: the Store contract's suite
(store_contract.py). Imported only by tests; zarrfs itself never imports it."""
