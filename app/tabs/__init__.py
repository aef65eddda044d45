"""The console's tabs: per tab a layout module (`*_tab`) and its callbacks (plain values in and out,
tested without a browser), the form made from the config's fields, and the page's scripts."""
