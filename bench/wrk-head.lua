-- SPDX-License-Identifier: Apache-2.0
--
-- wrk script of the nginx benchmarks (bench/run.sh B1/B2, record-overhead
-- style runs): the request head with its header lines in a fixed order.
--
-- wrk builds its one request head from a Lua table (the -H headers and
-- Host) with pairs(), whose order changes from one wrk process to the next:
-- one run sends "Host" first, the next "traceparent" first.  This sorts the
-- header names, so every run sends the same bytes, and bench-ngxclient can
-- replay exactly those under callgrind (B1i).  No request() function here:
-- wrk still formats the head once and sends it unchanged (no Lua call per
-- request).

function init(args)
	wrk.format = function(method, path, headers, body)
		method = method or wrk.method
		path = path or wrk.path
		headers = headers or wrk.headers
		body = body or wrk.body
		if not headers["Host"] then
			headers["Host"] = wrk.host
		end
		headers["Content-Length"] = body and string.len(body)
		local names = {}
		for name in pairs(headers) do
			names[#names + 1] = name
		end
		table.sort(names)
		local s = { string.format("%s %s HTTP/1.1", method, path) }
		for _, name in ipairs(names) do
			s[#s + 1] = string.format("%s: %s", name, headers[name])
		end
		s[#s + 1] = ""
		s[#s + 1] = body or ""
		return table.concat(s, "\r\n")
	end
end
