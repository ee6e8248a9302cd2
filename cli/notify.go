package cli

import (
	"net"
	"os"
)

// sdNotify tells the service manager that started serve how it is doing
// (sd_notify(3)): "READY=1" once the listeners are open, "STOPPING=1"
// when the shutdown begins. systemd's
// Type=notify units wait for READY=1 (deploy/systemd/svcgw.service). It
// does nothing outside such a unit ($NOTIFY_SOCKET unset), and a failure
// to send is only returned: the service goes on either way.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' { // an abstract socket
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
