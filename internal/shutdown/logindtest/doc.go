// Package logindtest is a stand-in systemd-logind for tests of the node
// shutdown manager: a private dbus-daemon (StartBus), and on it an object
// that answers as org.freedesktop.login1 does (StartLogind): Inhibit hands
// out one end of a pipe whose closing the test sees as the lock's release,
// InhibitDelayMaxUSec is a property, PrepareForShutdown is emitted on
// demand, and the systemd manager's KillUnit with SIGHUP for
// systemd-logind.service reads the logind drop-in directory again, as
// logind does on a reload. Nothing here touches the machine's own D-Bus or
// logind.
package logindtest
