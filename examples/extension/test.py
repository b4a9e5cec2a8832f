"""gmext.describe on a DeviceArray and a view: run under gpumem."""

import gpumem
import gmext

a = gpumem.zeros((4, 3), "float64")
d = gmext.describe(a)
print(d)
assert d["ptr"] == a.ptr and d["shape"] == (4, 3)
assert d["strides"] == (24, 8) and d["dtype"] == "float64"
v = gmext.describe(a.reshape(12)[5:])
assert v["ptr"] == a.ptr + 40 and v["shape"] == (7,)
r = gmext.describe(a[::-1, ::2])         # the view's own layout
assert r["strides"] == (-24, 16) and r["ptr"] == a.ptr + 3 * 24
try:
    gmext.describe(42)
except TypeError as exc:
    print("checked:", exc)
else:
    raise AssertionError("describe(42) did not raise")
print("extension example: ok")
