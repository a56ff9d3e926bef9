package v1alpha1

// Backups configures scheduled backups of the accounting database and slurmctld's state
// (docs/backup.md): a CronJob whose Jobs dump the database, copy StateSaveLocation and keep
// the newest few.
type Backups struct {
	// Schedule says when a backup is taken, in cron's five fields (minute, hour, day of month,
	// month, day of week: "0 3 * * *" is every day at 03:00) or a macro (@daily, @hourly, …),
	// in TimeZone. A field out of its range is refused at admission; a schedule the CronJob
	// API refuses otherwise (a range whose start is after its end) is reported in the Degraded
	// condition with this field's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('TZ=')",message="set the time zone in backups.timeZone, not in the schedule"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.contains('TZ=') || self.matches('^([*?]|0*[0-5]?[0-9](-0*[0-5]?[0-9])?)(/[1-9][0-9]*)?(,([*?]|0*[0-5]?[0-9](-0*[0-5]?[0-9])?)(/[1-9][0-9]*)?)* +([*?]|0*([01]?[0-9]|2[0-3])(-0*([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?(,([*?]|0*([01]?[0-9]|2[0-3])(-0*([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?)* +([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?(,([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?)* +([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?(,([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)* +([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?(,([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?)*$')",message="a field is out of cron's range: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT; each field a *, a value, a range a-b, with /step, or a list of them"
	Schedule string `json:"schedule"`

	// TimeZone of the schedule, an IANA name such as "Europe/Berlin" or "Asia/Ho_Chi_Minh";
	// empty: the time zone of the kube-controller-manager, most often UTC.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+/-]*$`
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// VolumeSourceName names an entry of spec.volumeSources the backups are written to, under
	// <clusterName>/<time>-scheduled/: accounting.sql (a mariadb-dump of the accounting
	// database, one consistent snapshot), statesave/ (a copy of StateSaveLocation, owners
	// kept) and SHA256SUMS. The backup Job writes as root: an NFS export must not squash root
	// for it. An emptyDir source is refused (the backups would go with the Job's pod). It may be
	// the volume spec.upgrades.backup names: the backups before upgrades are never deleted by
	// the scheduled ones.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	VolumeSourceName string `json:"volumeSourceName"`

	// Keep is how many scheduled backups are kept: once a backup is written whole, older
	// scheduled ones beyond this count are deleted, and so are folders of runs that stopped
	// half-way.
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Keep int32 `json:"keep,omitempty"`

	// Suspend stops taking backups (the CronJob's suspend) and keeps the settings; a backup that
	// runs goes on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}
